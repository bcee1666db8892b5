import BlueZSimulator
import DBus
import LocalServices
import TestHarness
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension MonthsWithoutAPersonTests {
    /// Zombie links (issue #15) through `keepalive run`: a notification stream with `expect_every` that goes
    /// silent while BlueZ still says connected is caught within the window, recorded as `silentLink`, and the link
    /// is dropped; the next poll makes a new one, which notifies again.
    @Suite("Zombie links through keepalive run")
    struct ZombieLinkEndToEndTests {
        @Test func aSilentStreamOnAConnectedLinkIsRecordedAsSilentLinkAndTheLinkIsMadeAgain() async throws {
            try await CLITests.withSimulator(devices: 2) { bus, simulator in
                let notify =
                    "    notify: [{uuid: 4b410002-6b65-6570-616c-697665000000, for: 800ms, expect_every: 400ms}]\n"
                var text = "interval: 2s\nmin_interval: 1s\nmax_connections: 3\ndevices:\n"
                for number in 1...2 {
                    text +=
                        "  - name: sensor-\(number)\n    address: C0:FF:EE:00:00:0\(number)\n    read: [2a19]\n"
                        + notify
                }
                let file = try TemporaryFile(name: "keepalive.yaml", contents: text)
                defer { file.remove() }
                let process = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
                defer { process.terminate() }
                @Sendable func sensor1() -> [String] {
                    CLITests.records(process.standardOutput).filter { $0.device == "sensor-1" }.map(\.line)
                }
                try await waitUntil("sensor 1 polled with notifications", timeout: .seconds(20)) {
                    sensor1().contains { $0.contains("\"result\":\"newData\"") && $0.contains("\"hex\":") }
                }
                // The fault lasts until the link drops, and every poll drops its link at the end of its window:
                // injected
                // late in a window it would heal unseen. So it is injected again until a window catches it.
                let injectedAt = sensor1().count
                try await waitUntil("a silentLink record", timeout: .seconds(40)) {
                    if sensor1().dropFirst(injectedAt).contains(where: { $0.contains("\"code\":\"silentLink\"") }) {
                        return true
                    }
                    try await simulator.inject(.silentNotifications, device: "C0:FF:EE:00:00:01")
                    return false
                }
                let zombie = try #require(
                    sensor1().dropFirst(injectedAt).first { $0.contains("\"code\":\"silentLink\"") })
                #expect(zombie.contains("while the link is up (zombie link)"), "\(zombie)")
                #expect(zombie.contains("\"attempts\":1"), "\(zombie)")
                // Caught within the window, well before its end: the bound (400 ms) after the last notification.
                #expect(zombie.contains("\"outcome\":\"completed\""), "\(zombie)")
                let caughtAt = sensor1().firstIndex(of: zombie) ?? 0
                try await waitUntil("a new link that notifies", timeout: .seconds(40)) {
                    sensor1().dropFirst(caughtAt + 1).contains {
                        $0.contains("\"result\":\"newData\"") && $0.contains("\"hex\":")
                    }
                }
                #expect(
                    !CLITests.records(process.standardOutput).contains {
                        $0.device == "sensor-2" && $0.line.contains("silentLink")
                    })
                process.signal(SIGTERM)
                #expect(try await process.waitForExit(within: .seconds(10)) == 0)
                try await CLITests.expectAllDisconnected(simulator)
            }
        }
    }
}
