import KeepAlive
import Polling
import KeepAliveTesting
import Basics
import Testing

/// Polls asked for outside the grid, and intervals changed at run time.
@Suite("Poll engine commands")
struct PollEngineCommandTests {
    let clock = TestClock()
    let battery = BluetoothUUID(assigned: 0x2A19)
    let sensor = Peripheral(address: "AA:BB:CC:00:00:01", adapter: "hci0")

    func engine(_ transport: MockTransport, onRecord: (@Sendable (PollRecord) -> Void)? = nil) throws -> (
        KeepAlive, PollEngine
    ) {
        let keepAlive = try KeepAlive(configuration: .init(interval: .seconds(30)), clock: clock, logger: quietLogger)
        let engine = try PollEngine(
            peripherals: [PeripheralSpec(name: "sensor", peripheral: sensor, reads: [battery])], transport: transport,
            keepAlive: keepAlive, logger: quietLogger, onRecord: onRecord
        )
        return (keepAlive, engine)
    }

    @Test func aPollOnCommandIsARecordOfItsOwnInAWindowOfItsOwn() async throws {
        let transport = MockTransport(clock: clock)
        transport.add(sensor, characteristics: [battery: .fixed([77])])
        let seen = Locked<[PollRecord.Trigger]>([])
        let (keepAlive, engine) = try engine(transport) { record in seen.withLock { $0.append(record.trigger) } }
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            let scheduled = try await records.next()
            #expect(scheduled.trigger == .schedule)
            let commanded = try await engine.pollNow("sensor")
            #expect(commanded.trigger == .command)
            #expect(commanded.result != .failed, "\(String(describing: commanded.failure))")
            #expect(commanded.readings.first?.description == "battery 77 %")
            #expect(commanded.window?.outcome == .completed)
            #expect(commanded.window?.id != scheduled.window?.id, "a window of its own")
            #expect(try await records.next().trigger == .command, "the stream sees it too")
        }
        #expect(seen.withLock { $0 } == [.schedule, .command])
        #expect(transport.calls(.connect, on: sensor).count == 2)
        #expect(transport.calls(.disconnect, on: sensor).count == 2)
    }

    @Test func aCommandForAnUnknownDeviceIsATypedError() async throws {
        let transport = MockTransport(clock: clock)
        let (_, engine) = try engine(transport)
        await #expect(throws: PollEngine.CommandError.self) { _ = try await engine.pollNow("nobody") }
    }

    @Test func aCommandDuringAScheduledPollWaitsForIt() async throws {
        // Connecting takes 1 s: the command arrives while the scheduled poll is connected.
        let transport = MockTransport(clock: clock, latency: .init(connect: .seconds(1)))
        transport.add(sensor, characteristics: [battery: .fixed([5])])
        let (keepAlive, engine) = try engine(transport)
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            try await clock.waitForSleeper(until: clock.instant(.seconds(1)))  // the scheduled connect
            let command = Task { try await engine.pollNow("sensor") }
            clock.advance(to: clock.instant(.seconds(1)))
            _ = try await records.next()
            try await clock.waitForSleeper(until: clock.instant(.seconds(2)))  // the command's connect
            clock.advance(to: clock.instant(.seconds(2)))
            #expect(try await command.value.trigger == .command)
        }
        // Never two links to one device: each connect is followed by its disconnect before the next connect.
        let order = transport.calls.filter { $0.peripheral == sensor }.map(\.operation)
        #expect(order == [.connect, .read(battery), .disconnect, .connect, .read(battery), .disconnect], "\(order)")
    }

    @Test func aNewIntervalTakesEffectAtOnce() async throws {
        let transport = MockTransport(clock: clock)
        transport.add(sensor, characteristics: [battery: .fixed([5])])
        let (keepAlive, engine) = try engine(transport)
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            _ = try await records.next()  // tick 0 at 0 s
            #expect(try engine.setInterval(.seconds(10), forDevice: "sensor") == .seconds(10))
            // The grid now steps 10 s from the last tick: tick 1 at 10 s, not 30 s.
            try await clock.waitForSleeper(until: clock.instant(.seconds(10)))
            clock.advance(to: clock.instant(.seconds(10)))
            let next = try await records.next()
            #expect(next.tick == 1 && next.interval == .seconds(10))
        }
        #expect(throws: ConfigurationValueError.self) { try engine.setInterval(.zero, forDevice: "sensor") }
        #expect(throws: ConfigurationValueError.self) { try engine.setInterval(.seconds(5), forDevice: "nobody") }
    }
}
