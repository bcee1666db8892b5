import BlueZSimulator
import DBus
import LocalServices
import TestHarness
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension MonthsWithoutAPersonTests {
    /// Logs that do not flood (issue #15), through `keepalive run`: a device failing the same way every tick is
    /// warned about once; when it works again one line says how often it repeated, from when to when; the records
    /// keep every failure.
    @Suite("Repeated warnings through keepalive run")
    struct RepeatedWarningsEndToEndTests {
        @Test func aFailureRepeatedEveryTickIsLoggedOnceThenSummarisedWhenTheDeviceWorksAgain() async throws {
            try await CLITests.withSimulator(devices: 2) { bus, simulator in
                let file = try TemporaryFile(
                    name: "keepalive.yaml", contents: CLITests.configuration(devices: 2, interval: "1s"))
                defer { file.remove() }
                let process = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
                defer { process.terminate() }
                try await waitUntil("sensor 1 polled", timeout: .seconds(20)) {
                    process.standardOutput.contains("\"device\":\"sensor-1\"")
                }
                // An ATT error: permanent, the device's own (the adapter is fine), the same every tick.
                try await simulator.inject(.attError(0x0e), device: "C0:FF:EE:00:00:01")
                @Sendable func attFailures() -> Int {
                    CLITests.records(process.standardOutput).filter {
                        $0.device == "sensor-1" && $0.line.contains("\"code\":\"attError\"")
                    }.count
                }
                // The scheduler backs off after consecutive failures: three take a while.
                try await waitUntil("three ATT failures recorded", timeout: .seconds(60)) { attFailures() >= 3 }
                // The ATT error's lines only: on a loaded machine a window may also expire once (another error class,
                // logged on its own).
                @Sendable func warnings() -> [Substring] {
                    process.standardError.split(separator: "\n").filter {
                        $0.contains("poll failed") && $0.contains("device=sensor-1") && $0.contains("attError")
                    }
                }
                #expect(warnings().count == 1, "\(warnings())")
                try simulator.clearFault("att-error", device: "C0:FF:EE:00:00:01")
                try await waitUntil("the summary", timeout: .seconds(60)) {
                    warnings().contains { $0.contains("…repeated") }
                }
                let failures = attFailures()
                let summary = try #require(warnings().first { $0.contains("…repeated") })
                // Every failure but the first one logged; those after the summary (none: the device works) would start
                // afresh.
                #expect(
                    summary.contains("…repeated \(failures - 1) times in "), "\(summary) after \(failures) failures")
                #expect(
                    summary.contains("error=attError") && summary.contains("first=") && summary.contains("last="),
                    "\(summary)")
                process.signal(SIGTERM)
                #expect(try await process.waitForExit(within: .seconds(10)) == 0)
            }
        }
    }
}
