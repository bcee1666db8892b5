import CoreMetrics
import KeepAlive
import KeepAliveTesting
import MetricsTestKit
import Polling
import Testing

/// What the engine reports through the factory it is given, on MockTransport's manual clock (connect 1 s, read 2 s,
/// disconnect 0.5 s): each record counted once by device, result and code, each phase timed.
@Suite("Poll engine: metrics")
struct PollEngineMetricsTests {
    let clock = TestClock()
    let battery = BluetoothUUID(assigned: 0x2A19)
    let sensor = Peripheral(address: "AA:BB:CC:00:00:01", adapter: "hci0")

    func setUp(_ metrics: TestMetrics) throws -> (MockTransport, KeepAlive, PollEngine) {
        let transport = MockTransport(
            clock: clock, latency: .init(connect: .seconds(1), read: .seconds(2), disconnect: .milliseconds(500)))
        transport.add(sensor, characteristics: [battery: .counter { UInt8($0 % 100) }])
        let keepAlive = try KeepAlive(configuration: .init(interval: .seconds(30)), clock: clock, logger: quietLogger)
        let engine = try PollEngine(
            peripherals: [PeripheralSpec(name: "sensor", peripheral: sensor, reads: [battery])],
            transport: transport, keepAlive: keepAlive, configuration: .init(metricsFactory: metrics),
            logger: quietLogger)
        return (transport, keepAlive, engine)
    }

    func step(through milliseconds: [Int64]) async throws {
        for value in milliseconds {
            let instant = clock.instant(.milliseconds(value))
            try await clock.waitForSleeper(until: instant)
            clock.advance(to: instant)
        }
    }

    func phase(_ metrics: TestMetrics, _ name: String) throws -> [Int64] {
        try metrics.expectTimer("keepalive_poll_phase_seconds", [("adapter", "hci0"), ("phase", name)]).values
    }

    @Test func aPollIsCountedOnceAndEachOfItsPhasesTimed() async throws {
        let metrics = TestMetrics()
        let (_, keepAlive, engine) = try setUp(metrics)
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            try await step(through: [1_000, 3_000, 3_500])
            let record = try await records.next()
            #expect(record.result == .newData)
        }
        let counted = try metrics.expectCounter(
            "keepalive_polls_total", [("device", "sensor"), ("result", "newData")])
        #expect(counted.totalValue == 1)
        #expect(try phase(metrics, "connect") == [1_000_000_000])
        #expect(try phase(metrics, "read") == [2_000_000_000])
        #expect(try phase(metrics, "disconnect") == [500_000_000])
        // MockTransport cannot tell service resolution apart: the connect is all of it.
        #expect(try phase(metrics, "service_resolution").isEmpty)
        #expect(try metrics.expectTimer("keepalive_link_seconds", [("adapter", "hci0")]).values == [2_500_000_000])
        #expect(try metrics.expectTimer("keepalive_slot_wait_seconds", [("adapter", "hci0")]).values == [0])
        #expect(try metrics.expectGauge("keepalive_failures_in_a_row", [("device", "sensor")]).lastValue == 0)
    }

    @Test func aFailedPollIsCountedByItsCodeAndTheFailuresInARow() async throws {
        let metrics = TestMetrics()
        let (transport, keepAlive, engine) = try setUp(metrics)
        transport.script(
            .connect, on: sensor, .fail(times: 1, with: TransportError(.notPermitted, "the device refuses us")))
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            try await step(through: [1_000, 1_500])
            let record = try await records.next()
            #expect(record.failure?.code == "notPermitted")
        }
        let failed = try metrics.expectCounter(
            "keepalive_polls_total", [("device", "sensor"), ("result", "failed"), ("code", "notPermitted")])
        #expect(failed.totalValue == 1)
        #expect(metrics.counterTotal(label: "keepalive_polls_total") == 1)
        #expect(try metrics.expectGauge("keepalive_failures_in_a_row", [("device", "sensor")]).lastValue == 1)
        // A failed connect is no connect latency.
        #expect(try phase(metrics, "connect").isEmpty)
    }
}
