import KeepAlive
import Polling
import KeepAliveTesting
import Testing

/// Zombie links (issue #15), on the manual clock: a notification stream that goes silent for longer than its
/// bound while the link is up fails the window as `silentLink` at the bound, and the link is dropped.
extension PollEngineTests {
    func listening(every period: Duration, silence: Duration?) throws -> (
        MockTransport, PollEngine, KeepAlive, Collector<PollRecord>
    ) {
        let transport = MockTransport(clock: clock)
        transport.add(sensor(0), characteristics: [temperature: .counter(every: period) { UInt8($0 % 256) }])
        let keepAlive = try makeKeepAlive()
        let spec = PeripheralSpec(
            name: "listener", peripheral: sensor(0), reads: [],
            notifications: [.init(characteristic: temperature, duration: .seconds(10), silence: silence)])
        let engine = try PollEngine(
            peripherals: [spec], transport: transport, keepAlive: keepAlive, logger: quietLogger)
        return (transport, engine, keepAlive, Collector(engine.records()))
    }

    @Test func aStreamSilentForLongerThanItsBoundFailsTheWindowAtTheBoundAndDropsTheLink() async throws {
        // Notifications every 5 s, but no silence over 2 s allowed: the first silence fails at 2 s.
        let (transport, engine, keepAlive, records) = try listening(every: .seconds(5), silence: .seconds(2))
        try await withRunning(keepAlive) {
            try await step(through: [2_000])
            let record = try await records.next()
            #expect(record.result == .failed)
            #expect(record.failure?.code == "silentLink")
            #expect(record.failure?.transient == true)
            #expect(
                record.failure?.message.contains("for 2s while the link is up") == true,
                "\(record.failure?.message ?? "")")
            #expect(record.attempts == 1, "a zombie link is not retried in its window")
            #expect(record.window.map { $0.used } == .seconds(2))
        }
        // The engine must outlive the run: its registrations hold it weakly.
        withExtendedLifetime(engine) {}
        expectAlwaysDisconnected(transport, [sensor(0)])
    }

    @Test func aStreamThatKeepsItsPaceListensForItsWholeDuration() async throws {
        // A bound that is no multiple of the pace: on the manual clock a notification and the silence check never
        // fall due at the same instant (where the check could run before the notification is taken in).
        let (transport, engine, keepAlive, records) = try listening(every: .seconds(1), silence: .milliseconds(2_500))
        try await withRunning(keepAlive) {
            try await step(through: (1...10).map { Int64($0) * 1_000 })
            let record = try await records.next()
            #expect(record.result == .newData)
            // One a second; the tenth comes as the listening ends, and may or may not make it.
            #expect(record.notifications.count >= 9)
            #expect(record.window.map { $0.used } == .seconds(10))
        }
        // The engine must outlive the run: its registrations hold it weakly.
        withExtendedLifetime(engine) {}
        expectAlwaysDisconnected(transport, [sensor(0)])
    }

    @Test func withoutABoundASilentStreamIsListenedToForItsDuration() async throws {
        let (transport, engine, keepAlive, records) = try listening(every: .seconds(50), silence: nil)
        try await withRunning(keepAlive) {
            try await step(through: [10_000])
            let record = try await records.next()
            #expect(record.result == .noData)
            #expect(record.window.map { $0.used } == .seconds(10))
        }
        // The engine must outlive the run: its registrations hold it weakly.
        withExtendedLifetime(engine) {}
        expectAlwaysDisconnected(transport, [sensor(0)])
    }
}
