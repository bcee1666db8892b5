import BlueZSimulator
import DBus
import LocalServices
import TestHarness
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The control interface (issue #37) through the binaries: `keepalive run` as root on a bus that denies as the
/// system bus does, with the policy from `udev/` loaded; `keepalive status`, `explain`, `poll`, `interval`, `pause`
/// and `resume` as root and as a second uid.
@Suite("Control interface through keepalive run, with the udev/ D-Bus policy")
struct ControlInterfaceEndToEndTests {
    /// `udev/io.keepalive.conf` of this checkout.
    static let policy: String = {
        let parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false).dropLast(3)
        return parts.joined(separator: "/") + "/udev/io.keepalive.conf"
    }()

    /// nobody: a second uid with no group of ours.
    static let nobody: (uid: uid_t, gid: gid_t, groups: [gid_t]) = (65534, 65534, [])

    /// A daemon polling two simulated sensors on a system-like bus; `body` gets the bus address and the daemon.
    static func withDaemon(_ body: @Sendable (String, CommandProcess) async throws -> Void) async throws {
        let bus = try PrivateBus.start(systemPolicy: [policy])
        defer { bus.stop() }
        var configuration = BlueZSimulator.Configuration(adapters: ["hci0"], devices: .sensors(count: 2))
        configuration.latencies.disconnect = .milliseconds(100)
        let simulator = try await BlueZSimulator.start(on: .address(bus.address), configuration: configuration)
        // 2-s ticks, longer under a sanitizer: ThreadSanitizer on two slow cores let both of sensor-1's first
        // 1.33-s windows expire, and explain then said "backing off", not "polled".
        let file = try TemporaryFile(
            name: "keepalive.yaml",
            contents: CLITests.configuration(
                devices: 2, interval: "\(2 * sanitizerSlowdown)s", extra: "low_power:\n  mode: off\n"))
        defer { file.remove() }
        let daemon = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
        defer { daemon.terminate() }
        do {
            try await waitUntil("the control interface is ready", timeout: .seconds(20)) {
                daemon.standardError.contains("control interface ready")
            }
            try await waitUntil("both sensors polled", timeout: .seconds(20)) {
                Set(CLITests.records(daemon.standardOutput).map(\.device)).count == 2
            }
            try await body(bus.address, daemon)
        } catch {
            Issue.record("daemon's log:\n\(daemon.standardError)")
            await simulator.stop()
            throw error
        }
        await simulator.stop()
    }

    static func run(
        _ arguments: [String], bus: String, as user: (uid: uid_t, gid: gid_t, groups: [gid_t])? = nil
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        let process = try CommandProcess(arguments + ["--bus", bus], user: user)
        defer { process.terminate() }
        let status = try await process.waitForExit(within: .seconds(60) * sanitizerSlowdown)
        return (status, process.standardOutput, process.standardError)
    }

    @Test func everyUserReadsOnlyRootSteersAndACommandPollSaysSo() async throws {
        try await Self.withDaemon { bus, daemon in
            // A second uid reads…
            let status = try await Self.run(["status", "--json"], bus: bus, as: Self.nobody)
            #expect(status.status == 0, "\(status.stderr)")
            #expect(status.stdout.contains("\"name\":\"sensor-1\"") && status.stdout.contains("\"name\":\"sensor-2\""))
            #expect(status.stdout.contains("\"last_result\":"), "\(status.stdout)")
            let table = try await Self.run(["status"], bus: bus, as: Self.nobody)
            #expect(table.status == 0 && table.stdout.contains("DEVICE") && table.stdout.contains("sensor-2"))
            let explain = try await Self.run(["explain", "sensor-1"], bus: bus, as: Self.nobody)
            #expect(explain.status == 0, "\(explain.stderr)")
            #expect(explain.stdout.contains("polled"), "\(explain.stdout)")
            #expect(explain.stdout.contains("now: next poll at"), "\(explain.stdout)")

            // …and may not steer: the bus refuses, and the CLI says so in words, with exit status 77.
            for arguments in [
                ["poll", "sensor-1"], ["interval", "sensor-1", "10s"], ["pause", "sensor-1"],
                ["resume", "sensor-1"],
            ] {
                let refused = try await Self.run(arguments, bus: bus, as: Self.nobody)
                #expect(refused.status == 77, "\(arguments): \(refused.status) \(refused.stderr)")
                #expect(refused.stderr.contains("not allowed"), "\(refused.stderr)")
                #expect(refused.stderr.contains("`keepalive` group"), "\(refused.stderr)")
            }
            #expect(!CLITests.records(daemon.standardOutput).contains { $0.line.contains("\"trigger\":\"command\"") })

            // Root steers: a poll on command, whose record says so.
            let poll = try await Self.run(["poll", "sensor-2"], bus: bus)
            #expect(poll.status == 0, "\(poll.stderr)")
            #expect(poll.stdout.hasPrefix("sensor-2: newData") || poll.stdout.hasPrefix("sensor-2: noData"))
            let commanded = CLITests.records(daemon.standardOutput).filter {
                $0.device == "sensor-2" && $0.line.contains("\"trigger\":\"command\"")
            }
            #expect(commanded.count == 1, "\(commanded.map(\.line))")

            let interval = try await Self.run(["interval", "sensor-1", "10s"], bus: bus)
            #expect(interval.status == 0 && interval.stdout == "sensor-1: every 10s\n", "\(interval)")
            let below = try await Self.run(["interval", "sensor-1", "500ms"], bus: bus)
            #expect(below.status == 1 && below.stderr.contains("below its floor"), "\(below)")
            let device = try await Self.run(["status", "--json"], bus: bus)
            #expect(device.stdout.contains("\"interval_reason\":\"command\""), "\(device.stdout)")

            let unknown = try await Self.run(["explain", "nowhere"], bus: bus)
            #expect(unknown.status == 1 && unknown.stderr.contains("no device named `nowhere`"), "\(unknown)")
        }
    }

    @Test func aPausedDeviceIsNeitherPolledNorRecordedUntilResumed() async throws {
        try await Self.withDaemon { bus, daemon in
            let paused = try await Self.run(["pause", "sensor-1"], bus: bus)
            #expect(paused.status == 0 && paused.stdout == "sensor-1: paused\n", "\(paused)")
            let before = CLITests.records(daemon.standardOutput).filter { $0.device == "sensor-1" }.count
            // Two of sensor-2's ticks pass (2 s each, 6 under a sanitizer); sensor-1 stays silent, and explain says
            // why.
            let sensor2 = CLITests.records(daemon.standardOutput).filter { $0.device == "sensor-2" }.count
            try await waitUntil("two more records of sensor-2", timeout: .seconds(20)) {
                CLITests.records(daemon.standardOutput).filter { $0.device == "sensor-2" }.count >= sensor2 + 2
            }
            // One poll of sensor-1 may have been under way when it was paused.
            let during = CLITests.records(daemon.standardOutput).filter { $0.device == "sensor-1" }.count
            #expect(during <= before + 1)
            let explain = try await Self.run(["explain", "sensor-1"], bus: bus)
            #expect(explain.stdout.contains("now: paused by its operator since"), "\(explain.stdout)")
            #expect(explain.stdout.contains("not polled: paused by its operator"), "\(explain.stdout)")
            let poll = try await Self.run(["poll", "sensor-1"], bus: bus)
            #expect(poll.status == 1 && poll.stderr.contains("is paused"), "\(poll)")
            let status = try await Self.run(["status"], bus: bus)
            #expect(status.stdout.contains("sensor-1  paused"), "\(status.stdout)")

            let resumed = try await Self.run(["resume", "sensor-1"], bus: bus)
            #expect(resumed.stdout == "sensor-1: resumed\n", "\(resumed)")
            try await waitUntil("sensor-1 polled again", timeout: .seconds(20)) {
                CLITests.records(daemon.standardOutput).filter { $0.device == "sensor-1" }.count > during
            }
        }
    }

    /// A live tool that watches hears every record as its JSON line, and reads the health as a property.
    @Test func aRecordSignalCarriesEachRecordsLineAndTheHealthIsAProperty() async throws {
        try await Self.withDaemon { bus, daemon in
            let connection = try await DBusConnection(bus: .address(bus))
            let records = try await connection.signals(
                matching: MatchRule(interface: "io.keepalive.Daemon1", member: "Record"))
            // Records are signalled only while someone watches: a daemon nobody watches makes no signal.
            _ = try await connection.call(
                destination: "io.keepalive", path: "/io/keepalive/Daemon", interface: "io.keepalive.Daemon1",
                method: "WatchRecords")
            let health = try await connection.call(
                destination: "io.keepalive", path: "/io/keepalive/Daemon", interface: "org.freedesktop.DBus.Properties",
                method: "Get", arguments: [.string("io.keepalive.Daemon1"), .string("Health")])
            guard case .variant(.string(let text))? = health.first else {
                Issue.record("Health is not a string: \(health)")
                return
            }
            #expect(text.hasPrefix("polling 2 devices every \(2 * sanitizerSlowdown)s"), "\(text)")
            var heard: [(String, String)] = []
            for try await signal in records {
                guard case .string(let device) = signal.arguments.first,
                    case .string(let line) = signal.arguments.last
                else { continue }
                heard.append((device, line))
                if heard.count == 2 { break }
            }
            await connection.close()
            for (device, line) in heard {
                #expect(line.contains("\"device\":\"\(device)\""))
                // The output is written before the signal leaves; its pipe is read by a thread of this process.
                try await waitUntil("the signal's line is the output's: \(line)") {
                    CLITests.records(daemon.standardOutput).contains { $0.line == line }
                }
            }
        }
    }

    @Test func withoutADaemonTheCommandsSaySoWithExitStatus69() async throws {
        let bus = try PrivateBus.start(systemPolicy: [Self.policy])
        defer { bus.stop() }
        for arguments in [["status"], ["explain", "sensor-1"], ["poll", "sensor-1"]] {
            let result = try await Self.run(arguments, bus: bus.address, as: Self.nobody)
            #expect(result.status == 69, "\(arguments): \(result)")
            #expect(result.stderr.contains("no keepalive daemon answers"), "\(result.stderr)")
        }
    }
}
