import Basics
import KeepAlive
import KeepAliveTesting
import Polling
import Readings
import Testing

/// Passive sensors and polls gated on hearing a device, on MockTransport's manual clock: one record per device
/// per tick from what was heard, no Connect for a passive sensor, `notHeard` for silence, and silence never backs
/// a device off. The scheduler's interval is 30 s; its window budget 20 s.
@Suite("Poll engine: advertisements")
struct PollEngineAdvertisementTests {
    let clock = TestClock()
    let battery = BluetoothUUID(assigned: 0x2A19)
    let porch = Peripheral(address: "A4:C1:38:00:00:01", adapter: "hci0")
    let shed = Peripheral(address: "A4:C1:38:00:00:02", adapter: "hci0")
    let bthome = try! BluetoothUUID("fcd2")

    /// A plain BTHome v2 advertisement (bthome.io's format): device info 0x40, packet id, temperature × 0.01 °C.
    func advertisement(
        of peripheral: Peripheral, packet: UInt8, temperature: Int16 = 2_106, rssi: Int16 = -61, info: UInt8 = 0x40
    ) -> Advertisement {
        let raw = UInt16(bitPattern: temperature)
        return Advertisement(
            peripheral: peripheral, rssi: rssi,
            serviceData: [bthome: [info, 0x00, packet, 0x02, UInt8(raw & 0xFF), UInt8(raw >> 8)]])
    }

    func setUp(_ specs: [PeripheralSpec]) throws -> (MockTransport, KeepAlive, PollEngine) {
        let transport = MockTransport(
            clock: clock, latency: .init(connect: .milliseconds(100), read: .milliseconds(10), disconnect: .zero))
        transport.add(shed, characteristics: [battery: .fixed([88])])
        let keepAlive = try KeepAlive(configuration: .init(interval: .seconds(30)), clock: clock, logger: quietLogger)
        let engine = try PollEngine(
            peripherals: specs, transport: transport, keepAlive: keepAlive, logger: quietLogger)
        return (transport, keepAlive, engine)
    }

    var passivePorch: PeripheralSpec {
        PeripheralSpec(name: "porch", peripheral: porch, advertising: .init(format: .bthome))
    }

    @Test func aPassiveSensorGetsOneRecordPerTickFromWhatWasHeardAndIsNeverConnected() async throws {
        let (transport, keepAlive, engine) = try setUp([passivePorch])
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            // Tick 0 starts the listening and waits for the sensor.
            try await waitUntil("the listening runs", timeout: .seconds(60)) { transport.listeners(on: "hci0") == 1 }
            transport.advertise(advertisement(of: porch, packet: 1))
            let first = try await records.next()
            #expect(first.result == .newData)
            #expect(first.source == .advertisement)
            #expect(first.heard == PollRecord.Heard(count: 1, rssi: -61, packetID: 1, format: .bthome))
            #expect(first.readings.map(\.name) == ["temperature"])
            #expect(first.readings.first?.value == .number(21.06))
            #expect(first.readings.first?.unit == "°C")

            // The same measurement three more times (a sensor repeats itself), then tick 1: heard, nothing new.
            for _ in 0..<3 { transport.advertise(advertisement(of: porch, packet: 1, rssi: -70)) }
            try await waitUntil("the three are heard") { engine.advertisementsHeard("porch") == 3 }
            clock.advance(to: clock.instant(.seconds(30)))
            let second = try await records.next()
            #expect(second.result == .noData)
            #expect(second.heard == PollRecord.Heard(count: 3, rssi: -70, packetID: 1, format: .bthome))
            #expect(second.readings.first?.value == .number(21.06), "the latest readings, even when not new")

            // A new packet: newData with its readings.
            transport.advertise(advertisement(of: porch, packet: 2, temperature: 2_150))
            try await waitUntil("the new packet is heard") { engine.advertisementsHeard("porch") == 1 }
            clock.advance(to: clock.instant(.seconds(60)))
            let third = try await records.next()
            #expect(third.result == .newData)
            #expect(third.readings.first?.value == .number(21.5))
            #expect(third.heard?.packetID == 2)
        }
        #expect(transport.calls.isEmpty, "a passive sensor is never connected to: \(transport.calls)")
    }

    @Test func aSilentPassiveSensorIsNotHeardAtTheEndOfItsWindowAndNeverBacksOff() async throws {
        let (transport, keepAlive, engine) = try setUp([passivePorch])
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            try await waitUntil("the listening runs", timeout: .seconds(60)) { transport.listeners(on: "hci0") == 1 }
            // The window is 20 s; the wait ends 250 ms before it.
            try await clock.waitForSleeper(until: clock.instant(.milliseconds(19_750)))
            clock.advance(to: clock.instant(.milliseconds(19_750)))
            let silent = try await records.next()
            #expect(silent.result == .failed)
            #expect(silent.failure?.code == "notHeard")
            #expect(silent.isNotHeard)
            #expect(silent.heard?.count == 0)
            #expect(silent.failure?.message.contains("never heard since start") == true)
            // No backoff: tick 1 fires on time, at 30 s, and the sensor heard then is recorded.
            try await clock.waitForSleeper(until: clock.instant(.seconds(30)))
            clock.advance(to: clock.instant(.seconds(30)))
            try await waitUntil("tick 1 waits for the sensor") { keepAlive.statistics.ticksFired >= 2 }
            transport.advertise(advertisement(of: porch, packet: 7))
            let heard = try await records.next()
            #expect(heard.tick == 1)
            #expect(heard.result == .newData)
        }
    }

    @Test func aRefusedAdvertisementIsATypedErrorNeverAReading() async throws {
        var keyed = passivePorch
        keyed.advertising?.key = try AdvertisementKey(hex: "231d39c1d7cc1ab1aee224cd096db932")
        let (transport, keepAlive, engine) = try setUp([keyed])
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            try await waitUntil("the listening runs", timeout: .seconds(60)) { transport.listeners(on: "hci0") == 1 }
            // A plain packet from a device that has a key: refused.
            transport.advertise(advertisement(of: porch, packet: 1))
            let record = try await records.next()
            #expect(record.result == .failed)
            #expect(record.failure?.code == "badAdvertisement")
            #expect(record.failure?.message.hasPrefix("plainFromKeyedDevice") == true)
            #expect(record.readings.isEmpty)
            #expect(record.heard?.count == 1)
            // Refused again at the next tick, on time: a passive sensor never backs off.
            transport.advertise(advertisement(of: porch, packet: 2))
            try await waitUntil("the next packet is heard") { engine.advertisementsHeard("porch") == 1 }
            clock.advance(to: clock.instant(.seconds(30)))
            let next = try await records.next()
            #expect(next.tick == 1)
            #expect(next.failure?.code == "badAdvertisement")
            // A third: after two failures a polled device would skip this tick (backoff 2 × 30 s).
            transport.advertise(advertisement(of: porch, packet: 3))
            try await waitUntil("the third packet is heard") { engine.advertisementsHeard("porch") == 1 }
            clock.advance(to: clock.instant(.seconds(60)))
            let third = try await records.next()
            #expect(third.tick == 2)
            #expect(third.failure?.code == "badAdvertisement")
        }
    }

    @Test func aGatedPollSendsNoConnectWhileSilentAndPollsOnceHeard() async throws {
        let gated = PeripheralSpec(name: "shed", peripheral: shed, reads: [battery], pollWhen: .heard)
        let (transport, keepAlive, engine) = try setUp([gated])
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            // Tick 0: not heard since start; the tick waits 5 s (a quarter of the window at most) for it.
            try await clock.waitForSleeper(until: clock.instant(.seconds(5)))
            clock.advance(to: clock.instant(.seconds(5)))
            let silent = try await records.next()
            #expect(silent.failure?.code == "notHeard")
            #expect(silent.source == .connection)
            #expect(transport.calls(.connect, on: shed).isEmpty, "no Connect while silent")

            // Heard between the ticks: tick 1 polls, on time (silence did not back it off).
            transport.advertise(Advertisement(peripheral: shed, rssi: -55))
            try await waitUntil("the shed is heard") { engine.advertisementsHeard("shed") == 1 }
            try await clock.waitForSleeper(until: clock.instant(.seconds(30)))
            clock.advance(to: clock.instant(.seconds(30)))
            try await clock.waitForSleeper(until: clock.instant(.milliseconds(30_100)))
            clock.advance(to: clock.instant(.milliseconds(30_100)))
            try await clock.waitForSleeper(until: clock.instant(.milliseconds(30_110)))
            clock.advance(to: clock.instant(.milliseconds(30_110)))
            let polled = try await records.next()
            #expect(polled.tick == 1)
            #expect(polled.result == .newData)
            #expect(polled.heard == PollRecord.Heard(count: 1, rssi: -55))
            #expect(transport.calls(.connect, on: shed).count == 1)
        }
    }

    @Test func aGatedDeviceHeardDuringItsWaitIsPolledInTheSameTick() async throws {
        let gated = PeripheralSpec(name: "shed", peripheral: shed, reads: [battery], pollWhen: .heard)
        let (transport, keepAlive, engine) = try setUp([gated])
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            try await clock.waitForSleeper(until: clock.instant(.seconds(5)))
            try await waitUntil("the listening runs", timeout: .seconds(60)) { transport.listeners(on: "hci0") == 1 }
            transport.advertise(Advertisement(peripheral: shed, rssi: -50))
            try await clock.waitForSleeper(until: clock.instant(.milliseconds(100)))
            clock.advance(to: clock.instant(.milliseconds(100)))
            try await clock.waitForSleeper(until: clock.instant(.milliseconds(110)))
            clock.advance(to: clock.instant(.milliseconds(110)))
            let record = try await records.next()
            #expect(record.tick == 0)
            #expect(record.result == .newData)
            #expect(record.heard?.count == 1)
        }
    }

    /// Holds the porch only while `holding` says so (another gateway of the fleet holds it otherwise).
    final class Lease: PollAdmission {
        let holding = Locked(false)
        func admit(_ device: String) -> PollAdmissionDecision {
            holding.withLock { $0 } ? .poll(PollRecord.Holder(gateway: "gw-a", adapter: "hci0")) : .decline
        }
        func records(_ device: String) -> Bool { holding.withLock { $0 } }
    }

    @Test func aSharedPassiveSensorIsReportedByItsHolderOnly() async throws {
        let transport = MockTransport(clock: clock)
        let keepAlive = try KeepAlive(configuration: .init(interval: .seconds(30)), clock: clock, logger: quietLogger)
        let lease = Lease()
        let engine = try PollEngine(
            peripherals: [passivePorch], transport: transport, keepAlive: keepAlive, logger: quietLogger,
            admission: lease)
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            // Tick 0 belongs to the other gateway: no record from this one, heard or not.
            try await clock.waitForSleeper(until: clock.instant(.seconds(30)))
            #expect(keepAlive.statistics.ticksFired == 1)
            // Held from tick 1: its record names this gateway as the holder.
            lease.holding.withLock { $0 = true }
            clock.advance(to: clock.instant(.seconds(30)))
            try await waitUntil("the listening runs", timeout: .seconds(60)) { transport.listeners(on: "hci0") == 1 }
            transport.advertise(advertisement(of: porch, packet: 3))
            let record = try await records.next()
            #expect(record.tick == 1)
            #expect(record.result == .newData)
            #expect(record.holder?.gateway == "gw-a")
            #expect(record.source == .advertisement)
        }
    }
}
