import KeepAlive
import Polling
import KeepAliveTesting
import Basics
import Logging
import Testing

/// Slot-aware placement through the poll engine, on the manual clock: the devices' first polls (all at start)
/// wait for the adapter's slots; the engine learns how long each holds one, places them, and from their next
/// tick on none waits.
@Suite("Poll engine placement")
struct PollEnginePlacementTests {
    let clock = TestClock()
    let battery = BluetoothUUID(assigned: 0x2A19)
    let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    func sensor(_ index: Int) -> Peripheral {
        Peripheral(address: "AA:BB:CC:00:00:0\(index)", adapter: "hci0")
    }

    @Test func devicesThatCollideAtStartArePlacedApartAndNeverWaitAgain() async throws {
        // 4 devices every 10 s, each poll holding its slot 3 s (the connect), on 2 slots: a load of 1.2 slots.
        let transport = MockTransport(clock: clock, latency: .init(connect: .seconds(3)))
        for index in 0..<4 { transport.add(sensor(index), characteristics: [battery: .fixed([50])]) }
        let keepAlive = try KeepAlive(configuration: .init(interval: .seconds(10)), clock: clock, logger: quiet)
        let engine = try PollEngine(
            peripherals: (0..<4).map { PeripheralSpec(name: "sensor-\($0)", peripheral: sensor($0), reads: [battery]) },
            transport: transport, keepAlive: keepAlive, configuration: .init(maxConnections: 2), logger: quiet)
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            // Tick 0: all four at once. Two connect until 3 s, the other two get their slots then, until 6 s.
            for until in [3, 6] {
                try await clock.waitForSleepers(count: 2, until: clock.instant(.seconds(until)))
                clock.advance(to: clock.instant(.seconds(until)))
            }
            for _ in 0..<4 { _ = try await records.next() }
            let waits: [Duration] = records.all.map { $0.slotWait ?? .seconds(-1) }.sorted()
            #expect(waits == [.zero, .zero, .seconds(3), .seconds(3)])

            // Placed on what was measured: 3 s holds, no more than 2 at once.
            let phases = engine.placementPhases
            #expect(phases.count == 4, "\(phases)")
            for phase in phases.values {
                let overlapping = phases.values.filter { other in
                    let apart: Duration = other > phase ? other - phase : phase - other
                    return apart < .seconds(3)
                }
                #expect(overlapping.count <= 2, "phases \(phases)")
            }
            // Three more rounds, each device at its own grid point: every poll has a free slot.
            let groups = Dictionary(grouping: phases.keys, by: { phases[$0]! }).sorted { $0.key < $1.key }
            for round in 1...3 {
                for (phase, devices) in groups {
                    let fire = clock.instant(.seconds(10 * round) + phase)
                    try await clock.waitForSleeper(until: fire)
                    clock.advance(to: fire)
                    let connected = fire.advanced(by: .seconds(3))
                    try await clock.waitForSleepers(count: devices.count, until: connected)
                    clock.advance(to: connected)
                    try await waitUntil("round \(round)'s records of \(devices)") {
                        devices.allSatisfy { device in
                            records.all.contains { $0.device == device && $0.tick == UInt64(round) }
                        }
                    }
                }
            }
        }
        let later = records.all.filter { $0.tick >= 1 }
        #expect(later.count == 12)
        let waited = later.filter { $0.slotWait != .zero || $0.result == .failed }
        #expect(waited.isEmpty, "\(waited.map { ($0.device, $0.tick, $0.slotWait) })")
        // Never sooner than the interval after the device's previous poll.
        for device in (0..<4).map({ "sensor-\($0)" }) {
            let fired = records.all.filter { $0.device == device }.map(\.fired)
            for (previous, next) in zip(fired, fired.dropFirst()) {
                #expect(previous.duration(to: next) >= .seconds(10), "\(device): \(fired)")
            }
        }
    }

    /// One slot, two devices every 10 s (windows of 6.67 s), whose connects take `connect`. Steps the clock
    /// deadline by deadline (before the next tick) until the second device's record is in; returns both records.
    func contend(connect: Duration) async throws -> (first: PollRecord, second: PollRecord, KeepAlive.Statistics) {
        let transport = MockTransport(clock: clock, latency: .init(connect: connect))
        for index in 0..<2 { transport.add(sensor(index), characteristics: [battery: .fixed([50])]) }
        let keepAlive = try KeepAlive(configuration: .init(interval: .seconds(10)), clock: clock, logger: quiet)
        let engine = try PollEngine(
            peripherals: (0..<2).map { PeripheralSpec(name: "sensor-\($0)", peripheral: sensor($0), reads: [battery]) },
            transport: transport, keepAlive: keepAlive, configuration: .init(maxConnections: 1), logger: quiet)
        let records = Collector(engine.records())
        return try await withRunning(keepAlive) {
            // The first connect, the scheduler's next tick and the ledger's timer: all asleep before time moves.
            try await clock.waitForSleepers(count: 3)
            while records.all.count < 2 {
                let next = clock.pendingDeadlines.first { $0 > clock.now }
                guard let next, next < clock.instant(.seconds(10)) else {
                    try await waitUntil("both records") { records.all.count == 2 }
                    break
                }
                clock.advance(to: next)
                try await waitUntil("the step settles") {
                    records.all.count == 2 || clock.pendingDeadlines.contains { $0 > next }
                }
            }
            let first = try #require(records.all.first { $0.device == "sensor-0" })
            let second = try #require(records.all.first { $0.device == "sensor-1" })
            return (first, second, keepAlive.statistics)
        }
    }

    @Test func aPollThatNeverGetsASlotIsNoSlotNotTheDevicesFailure() async throws {
        // The first device's connect outlasts the windows: the second never gets the slot.
        let (first, second, statistics) = try await contend(connect: .seconds(8))
        #expect(second.failure?.code == "noSlot")
        #expect(second.isContention && !first.isContention)
        #expect(second.failure?.transient == true)
        #expect(second.attempts == 0)
        #expect(second.slotWait.map { $0 >= .milliseconds(6_600) } == true, "\(String(describing: second.slotWait))")
        #expect(second.failure?.message.contains("no connection slot free on hci0 within the window") == true)
        // Counted apart: the scheduler backs a device off for its failures, not for its neighbours'.
        #expect(statistics.contended == 1)
    }

    @Test func aSlotThatComesTooLateIsGivenBackAndTheTickIsNoSlot() async throws {
        // The first poll takes 6 s: the slot comes back with 0.67 s of the second's window left, less than an
        // attempt needs. It is not used (a connect that could only expire costs the sensor for nothing).
        let (first, second, statistics) = try await contend(connect: .seconds(6))
        #expect(first.result == .newData)
        #expect(second.failure?.code == "noSlot")
        #expect(second.attempts == 0)
        #expect(second.slotWait == .seconds(6))
        #expect(second.failure?.message.contains("in time: one came after 6s") == true, "\(second.failure!.message)")
        #expect(statistics.contended == 1)
        #expect(statistics.failures == 0)
    }
}
