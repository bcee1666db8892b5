import KeepAlive
import Polling
import KeepAliveTesting
import Testing

/// `PollRecord.link`: the transport's link time, asked after every attempt's disconnect and summed, on
/// MockTransport's manual clock (connect 1 s, read 2 s, disconnect 0.5 s: a link is up from the end of its
/// connect to the end of its disconnect, 2.5 s for one read).
@Suite("Poll engine: link time")
struct PollEngineLinkTimeTests {
    let clock = TestClock()
    let battery = BluetoothUUID(assigned: 0x2A19)
    let sensor = Peripheral(address: "AA:BB:CC:00:00:01", adapter: "hci0")

    func setUp() throws -> (MockTransport, KeepAlive, PollEngine) {
        let transport = MockTransport(
            clock: clock, latency: .init(connect: .seconds(1), read: .seconds(2), disconnect: .milliseconds(500)))
        transport.add(sensor, characteristics: [battery: .counter { UInt8($0 % 100) }])
        let keepAlive = try KeepAlive(configuration: .init(interval: .seconds(30)), clock: clock, logger: quietLogger)
        let engine = try PollEngine(
            peripherals: [PeripheralSpec(name: "sensor", peripheral: sensor, reads: [battery])],
            transport: transport, keepAlive: keepAlive, logger: quietLogger)
        return (transport, keepAlive, engine)
    }

    /// Walks the clock through exactly these instants (in ms), each once something sleeps until it.
    func step(through milliseconds: [Int64]) async throws {
        for value in milliseconds {
            let instant = clock.instant(.milliseconds(value))
            try await clock.waitForSleeper(until: instant)
            clock.advance(to: instant)
        }
    }

    @Test func aPollsLinkRunsFromItsConnectToTheEndOfItsDisconnect() async throws {
        let (transport, keepAlive, engine) = try setUp()
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            #expect(transport.linkTime(of: sensor) == nil, "no connect yet")
            try await step(through: [1_000])
            // The read sleeps until 3 s: the link is up, its time not known yet.
            try await clock.waitForSleeper(until: clock.instant(.seconds(3)))
            #expect(transport.linkTime(of: sensor) == nil)
            try await step(through: [3_000, 3_500])
            let record = try await records.next()
            #expect(record.result == .newData)
            #expect(record.link == .milliseconds(2_500))
            #expect(transport.linkTime(of: sensor) == .milliseconds(2_500))
        }
    }

    @Test func aRetrysLinksAreSummedAndAFailedConnectAddsNothing() async throws {
        let (transport, keepAlive, engine) = try setUp()
        transport.script(
            .connect, on: sensor,
            .fail(times: 1, with: TransportError(.connectionAborted, "le-connection-abort-by-local")))
        transport.script(
            .read(battery), on: sensor, .fail(times: 1, with: TransportError(.connectionAborted, "link lost")))
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            try await step(through: [
                1_000, 1_500,  // attempt 1: the connect fails after its latency; its disconnect; no link
                1_600, 2_600, 4_600, 5_100,  // attempt 2 (100 ms later): up at 2.6 s, the read fails, down at 5.1 s
                5_350, 6_350, 8_350, 8_850,  // attempt 3 (250 ms later): up at 6.35 s, down at 8.85 s
            ])
            let record = try await records.next()
            #expect(record.result == .newData)
            #expect(record.attempts == 3)
            #expect(record.link == .milliseconds(5_000))
        }
    }

    @Test func aConnectThatFailsReportsZeroNotTheLastPollsLink() async throws {
        let (transport, keepAlive, engine) = try setUp()
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            try await step(through: [1_000, 3_000, 3_500])
            let first = try await records.next()
            #expect(first.link == .milliseconds(2_500))
            transport.script(
                .connect, on: sensor,
                .alwaysFail(TransportError(.doesNotExist, "Does Not Exist", dbusName: "org.bluez.Error.DoesNotExist")))
            try await step(through: [30_000, 31_000, 31_500])
            let second = try await records.next()
            #expect(second.result == .failed && second.attempts == 1)
            #expect(second.link == .zero)
        }
    }
}
