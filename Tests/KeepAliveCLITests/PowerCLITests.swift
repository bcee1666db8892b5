import BlueZSimulator
import DBus
import LocalServices
import TestHarness
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `keepalive run` following the host's power: python-dbusmock's UPower on the same private bus as the BlueZ
/// simulator, and the operator's SIGUSR1/SIGUSR2 override.
@Suite("keepalive run and the host's power")
struct PowerCLITests {
    static let python =
        FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "python3"

    /// python-dbusmock's `template` on `bus`, once it owns `name`; its pipes drained so it never blocks.
    static func startMock(_ template: String, owning name: String, on bus: PrivateBus) async throws -> pid_t {
        let (pid, stdout, stderr) = try Subprocess.spawn(
            [
                "env", "DBUS_SYSTEM_BUS_ADDRESS=\(bus.address)", python, "-m", "dbusmock", "--system",
                "--logfile", "/dev/null", "--template", template,
            ])
        Thread { _ = Subprocess.readAll(stdout) }.start()
        Thread { _ = Subprocess.readAll(stderr) }.start()
        do {
            let watcher = try await bus.connect()
            try await waitUntil("\(template) is mocked", timeout: .seconds(20)) {
                try await watcher.nameOwner(of: name) != nil
            }
            await watcher.close()
        } catch {
            stopMock(pid)
            throw error
        }
        return pid
    }

    static func stopMock(_ pid: pid_t) {
        kill(pid, SIGKILL)
        _ = Subprocess.waitForExit(pid)
    }

    @Test func recordsShowPowerAndTheStretchedIntervalAsUPowerAndTheOperatorChangeIt() async throws {
        try await CLITests.withSimulator(devices: 1) { bus, _ in
            let mock = try await Self.startMock("upower", owning: "org.freedesktop.UPower", on: bus)
            defer { Self.stopMock(mock) }
            let driver = try await bus.connect()
            let file = try TemporaryFile(
                name: "keepalive.yaml", contents: CLITests.configuration(devices: 1, interval: "1s"))
            defer { file.remove() }
            let process = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { process.terminate() }

            @Sendable func lastRecord() -> String {
                process.standardOutput.split(separator: "\n").last.map(String.init) ?? ""
            }
            try await waitUntil("a record on mains", timeout: .seconds(20)) {
                lastRecord().contains("\"interval_ms\":1000,\"power\":\"normal\"")
            }
            // Logged by a task that runs beside the first polls: a record does not say it was written yet.
            try await waitUntil("the power source logged", timeout: .seconds(10)) {
                process.standardError.contains("power source: UPower")
            }

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

    @Test func sleepEndsEveryWindowDropsEveryLinkReleasesTheInhibitorAndWakePollsAtOnce() async throws {
        // BlueZ's real 2-s disconnect, inside logind's 5-s delay.
        try await CLITests.withSimulator(devices: 2, realistic: true) { bus, simulator in
            let mock = try await Self.startMock("logind", owning: "org.freedesktop.login1", on: bus)
            defer { Self.stopMock(mock) }
            let driver = try await bus.connect()
            @Sendable func inhibitors() async throws -> Int {
                let reply = try await driver.call(
                    destination: "org.freedesktop.login1", path: "/org/freedesktop/login1",
                    interface: "org.freedesktop.login1.Manager", method: "ListInhibitors", timeout: .seconds(10))
                guard case .array(_, let items)? = reply.first else { return -1 }
                return items.count
            }
            @Sendable func prepareForSleep(_ sleeping: Bool) async throws {
                _ = try await driver.call(
                    destination: "org.freedesktop.login1", path: "/org/freedesktop/login1",
                    interface: "org.freedesktop.DBus.Mock", method: "EmitSignal",
                    arguments: [
                        .string("org.freedesktop.login1.Manager"), .string("PrepareForSleep"), .string("b"),
                        .array(element: "v", [.variant(.boolean(sleeping))]),
                    ],
                    timeout: .seconds(10))
            }
            // Notifications for 3 s keep every window open most of the time.
            let yaml =
                "interval: 5s\ndevices:\n"
                + (1...2).map { number in
                    """
                          - name: sensor-\(number)\n    address: C0:FF:EE:00:00:0\(number)\n    notify: [{uuid: \
                        4b410002-6b65-6570-616c-697665000000, for: 3s}]\n
                        """
                }.joined()
            let file = try TemporaryFile(name: "keepalive.yaml", contents: yaml)
            defer { file.remove() }
            let process = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { process.terminate() }

            try await waitUntil("the inhibitor is held and both sensors are connected", timeout: .seconds(20)) {
                try await inhibitors() == 1 && simulator.connectedDevices.count == 2
            }
            let clock = ContinuousClock()
            let sleptAt = clock.now
            try await prepareForSleep(true)
            try await waitUntil("the inhibitor is released", timeout: .seconds(10)) { try await inhibitors() == 0 }
            let released = clock.now - sleptAt
            print("measured: PrepareForSleep(true) → inhibitor released (seen by the test) after \(released)")
            #expect(released < .seconds(5), "released after \(released), past logind's default delay")
            try await CLITests.expectAllDisconnected(simulator)
            let beforeSleep = CLITests.records(process.standardOutput)
            #expect(beforeSleep.count == 2)
            #expect(
                beforeSleep.allSatisfy { $0.line.contains("\"outcome\":\"cancelled\"") }, "\(process.standardOutput)")

            try await prepareForSleep(false)
            try await waitUntil("polling again with a new inhibitor", timeout: .seconds(20)) {
                try await inhibitors() == 1 && CLITests.records(process.standardOutput).count >= 4
            }
            let afterWake = CLITests.records(process.standardOutput).dropFirst(2)
            #expect(afterWake.allSatisfy { $0.line.contains("\"tick\":1,") }, "the wake tick: \(afterWake.map(\.line))")
            #expect(process.standardError.contains("sleep inhibitor released"), "\(process.standardError)")
            process.signal(SIGTERM)
            #expect(try await process.waitForExit(within: .seconds(10)) == 0)
            await driver.close()
        }
    }
}
