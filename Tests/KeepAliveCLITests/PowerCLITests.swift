import BlueZSimulator
import DBus
import DBusTesting
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `keepalive run` following the host's power: python-dbusmock's UPower on the same private bus as the BlueZ
/// simulator, and the operator's SIGUSR1/SIGUSR2 override.
@Suite("keepalive run and the host's power")
struct PowerCLITests {
    static let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "python3"

    @Test func recordsShowPowerAndTheStretchedIntervalAsUPowerAndTheOperatorChangeIt() async throws {
        try await CLITests.withSimulator(devices: 1) { bus, _ in
            let (mock, stdout, stderr) = try Subprocess.spawn(
                ["env", "DBUS_SYSTEM_BUS_ADDRESS=\(bus.address)", Self.python, "-m", "dbusmock", "--system",
                 "--logfile", "/dev/null", "--template", "upower"])
            Thread { _ = Subprocess.readAll(stdout) }.start()
            Thread { _ = Subprocess.readAll(stderr) }.start()
            defer {
                kill(mock, SIGKILL)
                _ = Subprocess.waitForExit(mock)
            }
            let driver = try await bus.connect()
            try await waitUntil("UPower is mocked", timeout: .seconds(20)) {
                try await driver.nameOwner(of: "org.freedesktop.UPower") != nil
            }
            let file = try TemporaryFile(name: "keepalive.yaml", contents: CLITests.configuration(devices: 1, interval: "1s"))
            defer { file.remove() }
            let process = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { process.terminate() }

            @Sendable func lastRecord() -> String { process.standardOutput.split(separator: "\n").last.map(String.init) ?? "" }
            try await waitUntil("a record on mains", timeout: .seconds(20)) {
                lastRecord().contains("\"interval_ms\":1000,\"power\":\"normal\"")
            }
            #expect(process.standardError.contains("power source: UPower"), "\(process.standardError)")

            try await driver.setProperty(
                "OnBattery", interface: "org.freedesktop.UPower", value: .boolean(true),
                destination: "org.freedesktop.UPower", path: "/org/freedesktop/UPower", timeout: .seconds(10))
            try await waitUntil("a record on battery, the interval doubled", timeout: .seconds(20)) {
                lastRecord().contains("\"interval_ms\":2000,\"power\":\"lowPower\"")
            }
            try await driver.setProperty(
                "OnBattery", interface: "org.freedesktop.UPower", value: .boolean(false),
                destination: "org.freedesktop.UPower", path: "/org/freedesktop/UPower", timeout: .seconds(10))
            try await waitUntil("back on mains", timeout: .seconds(20)) {
                lastRecord().contains("\"interval_ms\":1000,\"power\":\"normal\"")
            }

            process.signal(SIGUSR1)
            try await waitUntil("low power forced by SIGUSR1", timeout: .seconds(20)) {
                lastRecord().contains("\"interval_ms\":2000,\"power\":\"lowPower\"")
            }
            process.signal(SIGUSR2)
            try await waitUntil("the host decides again after SIGUSR2", timeout: .seconds(20)) {
                lastRecord().contains("\"interval_ms\":1000,\"power\":\"normal\"")
            }
            process.signal(SIGTERM)
            #expect(try await process.waitForExit(within: .seconds(10)) == 0)
            await driver.close()
        }
    }
}
