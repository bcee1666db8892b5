import Foundation
import TestHarness
import Testing

/// `run --check` is `run` without the radio: what `run` refuses at start, `--check` refuses, both with exit 78
/// (the unit's `RestartPreventExitStatus=78`: a restart cannot fix a configuration) and the place in the file.
@Suite("--check means run")
struct CheckMeansRunTests {
    static let mqtt = "mqtt:\n  broker: mqtt://127.0.0.1:1\n"

    @Test(arguments: [
        (
            "names on one topic level",
            mqtt + "devices:\n  - {name: a/b, address: C0:FF:EE:00:00:01, read: [2a19]}\n"
                + "  - {name: a+b, address: C0:FF:EE:00:00:02, read: [2a19]}\n",
            ":5:12:", "devices[1].name", "share the MQTT topic level `a_b`"
        ),
        (
            "one address on two adapters with MQTT",
            mqtt + "devices:\n  - {name: a, address: C0:FF:EE:00:00:01, read: [2a19]}\n"
                + "  - {name: b, address: c0:ff:ee:00:00:01, adapter: hci1, read: [2a19]}\n",
            ":5:24:", "devices[1].address", "Home Assistant knows a device by its address"
        ),
        (
            "a password file that is not there",
            mqtt + "  username: gw\n  password_file: /nonexistent/keepalive-password\n"
                + "devices:\n  - {name: a, address: C0:FF:EE:00:00:01, read: [2a19]}\n",
            ":4:18:", "mqtt.password_file", "cannot read `/nonexistent/keepalive-password`: No such file or directory"
        ),
        (
            "a TLS file that is not there",
            "mqtt:\n  broker: mqtts://127.0.0.1:1\n  tls: {ca_file: /nonexistent/keepalive-ca.pem}\n"
                + "devices:\n  - {name: a, address: C0:FF:EE:00:00:01, read: [2a19]}\n",
            ":3:8:", "mqtt.tls", "cannot read `/nonexistent/keepalive-ca.pem`: No such file or directory"
        ),
        (
            "an interval below the default floor",
            "interval: 1s\ndevices:\n  - {name: a, address: C0:FF:EE:00:00:01, read: [2a19]}\n",
            ":1:11:", "interval", "interval 1s is shorter than min_interval 5s (the default)"
        ),
        (
            "a device's interval below the file's floor",
            "min_interval: 3s\ndevices:\n  - {name: a, address: C0:FF:EE:00:00:01, interval: 2s, read: [2a19]}\n",
            ":3:53:", "devices[0].interval", "interval 2s is shorter than min_interval 3s (line 1)"
        ),
    ])
    func checkAndRunRefuseAlikeWithExit78(
        _ name: String, _ yaml: String, _ position: String, _ field: String, _ message: String
    ) async throws {
        let file = try TemporaryFile(name: "refused.yaml", contents: yaml)
        defer { file.remove() }
        for arguments in [["run", "--config", file.path, "--check"], ["run", "--config", file.path]] {
            let result = try await CommandProcess.run(arguments)
            #expect(result.status == 78, "\(name), \(arguments.last!): \(result.stderr)")
            #expect(result.stderr.contains(file.path + position), "\(name): \(result.stderr)")
            #expect(result.stderr.contains(field) && result.stderr.contains(message), "\(name): \(result.stderr)")
        }
    }

    @Test func theSameAddressOnTwoAdaptersIsStillFineWithoutMQTT() async throws {
        let file = try TemporaryFile(
            name: "two-adapters.yaml",
            contents: "devices:\n  - {name: a, address: C0:FF:EE:00:00:01, read: [2a19]}\n"
                + "  - {name: b, address: C0:FF:EE:00:00:01, adapter: hci1, read: [2a19]}\n")
        defer { file.remove() }
        let result = try await CommandProcess.run(["run", "--config", file.path, "--check"])
        #expect(result.status == 0, "\(result.stderr)")
    }

    /// A name with an ESC sequence (one that would clear the operator's screen) is shown spelled out, by `--check`
    /// and in the log of `run`.
    @Test func namesFromTheFileReachNoTerminalRaw() async throws {
        try await CLITests.withSimulator(devices: 1) { bus, _ in
            let file = try TemporaryFile(
                name: "escapes.yaml",
                contents: "interval: 1s\nmin_interval: 1s\ndevices:\n"
                    + "  - {name: \"evil\\e[2J\", address: C0:FF:EE:00:00:09, read: [2a19]}\n")
            defer { file.remove() }
            let check = try await CommandProcess.run(["run", "--config", file.path, "--check"])
            #expect(check.status == 0, "\(check.stderr)")
            #expect(check.stdout.contains("evil\\u{1B}[2J") && !check.stdout.contains("\u{1B}"), "\(check.stdout)")
            // The device is not in the simulator: its poll fails, and the warning names it.
            let run = try await CommandProcess.run(["run", "--config", file.path, "--bus", bus.address, "--ticks", "1"])
            #expect(run.stderr.contains("evil\\u{1B}[2J"), "\(run.stderr)")
            #expect(!run.stderr.contains("\u{1B}") && !run.stdout.contains("\u{1B}"))
        }
    }

    /// The unit's ExecCondition: exit 1 (the start is skipped, not failed) while the file names only simulated
    /// devices, as the installed example does; 0 once a real one is named, and 0 for a file that does not load
    /// (`run` then fails with 78 and says where).
    @Test func theConditionHoldsBackOnlyAnExampleOfSimulatedDevices() async throws {
        let example = try await CommandProcess.run(["run", "--config", CLITests.examplePath, "--condition"])
        #expect(example.status == 1, "\(example.stderr)")
        #expect(example.stderr.contains("names only simulated devices"))
        let real = try TemporaryFile(
            name: "real.yaml",
            contents: "devices:\n  - {name: a, address: C0:FF:EE:00:00:01, read: [2a19]}\n"
                + "  - {name: b, address: A4:C1:38:0B:2D:11, read: [2a19]}\n")
        defer { real.remove() }
        let started = try await CommandProcess.run(["run", "--config", real.path, "--condition"])
        #expect(started.status == 0, "\(started.stderr)")
        let broken = try TemporaryFile(name: "broken.yaml", contents: "devices: [\n")
        defer { broken.remove() }
        let unreadable = try await CommandProcess.run(["run", "--config", broken.path, "--condition"])
        #expect(unreadable.status == 0, "\(unreadable.stderr)")
    }
}
