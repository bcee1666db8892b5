import KeepAlive
import Polling
import KeepAliveTesting
import Basics
import Logging
import Testing

/// `PollEngine.withLink`: a long link of other work (a deferred task's history download) holds the device, and its
/// scheduled ticks meanwhile give up at once as contention that says who held the link, never as a failure.
@Suite("Poll engine: a link held by other work")
struct PollEngineLinkTests {
    let clock = TestClock()
    let battery = BluetoothUUID(assigned: 0x2A19)
    let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    let sensor = Peripheral(address: "AA:BB:CC:00:00:01", adapter: "hci0")

    @Test func aTickWhileAHistoryDownloadHoldsTheLinkIsContentionThatSaysSoAndTheNextOneIsPolled() async throws {
        let transport = MockTransport(clock: clock)
        transport.add(sensor, characteristics: [battery: .fixed([50])])
        let keepAlive = try KeepAlive(configuration: .init(interval: .seconds(10)), clock: clock, logger: quiet)
        let engine = try PollEngine(
            peripherals: [PeripheralSpec(name: "sensor", peripheral: sensor, reads: [battery])],
            transport: transport, keepAlive: keepAlive, configuration: .init(placement: false), logger: quiet)
        let records = Collector(engine.records())
        let (released, release) = AsyncStream<Void>.makeStream()
        try await withRunning(keepAlive) {
            let first = try await records.next()
            #expect(first.result == .newData && first.busy == nil, "\(first)")

            let download = Task {
                try await engine.withLink(to: "sensor", holder: "history download", characteristics: [battery]) {
                    _, _ in
                    for await _ in released { break }
                }
            }
            // Held, and its own Connect sent (the gate is taken before it): tick 0's and the download's.
            try await waitUntil("the download holds the device and has connected") {
                engine.gate.holder(of: "sensor") == "history download"
                    && transport.calls(.connect, on: sensor).count == 2
            }
            let connects = 2
            try await clock.waitForSleeper(until: clock.instant(.seconds(10)))
            clock.advance(to: clock.instant(.seconds(10)))
            let busy = try await records.next()
            #expect(busy.tick == 1)
            #expect(busy.failure?.code == "noSlot", "\(busy)")
            #expect(busy.busy == "history download")
            #expect(busy.failure?.message.contains("history download holds its link") == true)
            #expect(busy.isContention, "another's work is not a failure of the device")
            #expect(transport.calls(.connect, on: sensor).count == connects, "no Connect while another holds the link")

            release.yield()
            try await download.value
            #expect(engine.gate.holder(of: "sensor") == nil)
            // Contention never backs off: the next tick polls.
            try await clock.waitForSleeper(until: clock.instant(.seconds(20)))
            clock.advance(to: clock.instant(.seconds(20)))
            let after = try await records.next()
            #expect(after.tick == 2 && after.failure == nil && after.busy == nil, "\(after)")
        }
    }
}
