import Foundation
import LocalServices
import TestHarness
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A spool damaged while the daemon was down, through the binary: the case a user met, where one flipped bit cost
/// every record after it.
@Suite("Spool damage end to end", .serialized)
struct SpoolDamageEndToEndTests {
    @Test func aBitFlippedInTheSpoolOfAKilledDaemonCostsOnlyTheRecordItWasIn() async throws {
        try await CLITests.withSimulator(devices: 2) { bus, _ in
            let port = try freeLoopbackPort()  // nothing listens yet: the broker is absent at start
            let spool = try makeTemporaryDirectory(prefix: "keepalive-spool")
            defer { _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", spool]) }
            let file = try TemporaryFile(
                name: "keepalive.yaml",
                contents: MQTTBridgeEndToEndTests.configuration(port: port, spool: spool, interval: "1s"))
            defer { file.remove() }
            let first = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            try await waitUntil("12 records spooled with no broker", timeout: .seconds(30)) {
                CLITests.records(first.standardOutput).count >= 12
            }
            first.signal(SIGKILL)
            _ = try await first.waitForExit(within: .seconds(10))
            // Every line printed was in the spool first.
            let spooled = CLITests.records(first.standardOutput).map(\.line)

            // One bit flips half way into the segment.
            let segment = try #require(
                try FileManager.default.contentsOfDirectory(atPath: spool).first { $0.hasPrefix("segment-") })
            let size = try #require(
                try FileManager.default.attributesOfItem(atPath: spool + "/" + segment)[.size] as? Int)
            try flipBits(0x04, at: size / 2, of: spool + "/" + segment)

            let broker = try await MosquittoBroker.start(port: port)
            defer { broker.remove() }
            let subscriber = try await MQTTBridgeEndToEndTests.Subscriber(port: port)
            let second = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { second.terminate() }
            let delivered: @Sendable () -> Set<String> = {
                Set(
                    subscriber.received.withLock { $0 }.filter { $0.topic.hasSuffix("/state") }.map {
                        String(decoding: $0.payload, as: UTF8.self)
                    })
            }
            try await waitUntil("all but one of the first run's records delivered", timeout: .seconds(30)) {
                spooled.filter { delivered().contains($0) }.count >= spooled.count - 1
            }
            try await waitUntil("the damage published as dropped", timeout: .seconds(10)) {
                subscriber.last("keepalive/gw/dropped") == "1"
            }
            let missing = spooled.filter { !delivered().contains($0) }
            #expect(missing.count == 1, "missing: \(missing)")
            // The log reaches the test through a pipe of its own: wait for the line rather than expect it now.
            try await waitUntil("the damage logged, one record lost", timeout: .seconds(10)) {
                let log = second.standardError
                return log.contains("damaged spool records skipped") && log.contains("lost=1")
            }
            second.signal(SIGTERM)
            _ = try await second.waitForExit(within: .seconds(15))
            await subscriber.close()
            print(
                "spool damage end to end: \(spooled.count) records spooled, \(spooled.count - missing.count) delivered")
        }
    }
}
