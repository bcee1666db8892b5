import LocalServices
import TestHarness
import Foundation
import MQTT
@testable import MQTTBridge
import Testing

/// Figures, printed rather than asserted (a timed assertion fails on a busy machine, not on a slow bridge).
/// The numbers belong in BENCHMARKS.md, not in comments.
@Suite struct BridgeMeasurementTests {
    @Test func submitCostPerSyncPolicyAndPublishThroughputToALocalBroker() async throws {
        let clock = ContinuousClock()
        let count = 500
        for (label, policy) in [
            ("fdatasync every record", BridgeConfiguration.SyncPolicy.everyRecord),
            ("fdatasync every 64", .everyRecords(64)), ("never", .never),
        ] {
            let directory = try makeTemporaryDirectory(prefix: "bridge-measure")
            defer { removeDirectory(directory) }
            let bridge = try MQTTBridge(
                configuration: bridgeConfiguration(port: 1, directory: directory, syncPolicy: policy),
                devices: [kitchen],
                logger: testLogger())
            let payload = recordPayload(0)
            let elapsed = try clock.measure {
                for sequence in 0..<count {
                    try bridge.submit(device: "kitchen", sequence: UInt64(sequence), succeeded: true, payload: payload)
                }
            }
            let micros = Double(
                elapsed.components.attoseconds / 1_000_000_000_000 + elapsed.components.seconds * 1_000_000)
            print(
                """
                    submit, \(label): \(String(format: "%.1f", micros / Double(count))) µs per record \
                    (\(payload.count)-byte payload, \(count) records)
                    """
            )
            #expect(bridge.statistics.pending == count)
        }

        let broker = try await MosquittoBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "bridge-measure")
        defer {
            broker.remove()
            removeDirectory(directory)
        }
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(port: broker.port, directory: directory, syncPolicy: .never),
            devices: [kitchen],
            logger: testLogger())
        let running = RunningBridge(bridge)
        try await running.waitUntilConnected()
        try await waitUntil("the connection's announcements are done") { broker.log.contains("homeassistant/status") }
        let records = 5_000
        let start = clock.now
        for sequence in 0..<records {
            try bridge.submit(
                device: "kitchen", sequence: UInt64(sequence), succeeded: true, payload: recordPayload(UInt64(sequence))
            )
        }
        try await running.waitUntilDrained()
        let seconds =
            Double((clock.now - start).components.attoseconds) / 1e18 + Double((clock.now - start).components.seconds)
        print(
            """
                publish, QoS 1, a window of \(MQTTBridge.deliveryWindow) in flight, loopback mosquitto: \
                \(Int(Double(records) / seconds)) records/s (\(records) records)
                """
        )
        #expect(bridge.statistics.delivered >= UInt64(records))
        await running.stop()
    }
}
