import BlueZSimulator
import DBus
import LocalServices
import TestHarness
import Basics
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue #15's end-to-end tests, one at a time: each runs `keepalive run`, a dbus-daemon and the simulator, and
/// side by side on two cores they pushed other suites' wall-clock bounds over (a poll window of the CLI suite
/// expired at 1344 ms of 1333). The watchdog's tests are a group of their own (`WatchdogEndToEndTests`), one at a
/// time beside these: two groups of about a minute each rather than one of two and a half.
@Suite("Issue #15 (months without a person) through keepalive run", .serialized)
struct MonthsWithoutAPersonTests {}

extension MonthsWithoutAPersonTests {
    /// The healing ladder through `keepalive run` (issue #15): one adapter-level fault at a time in the simulator;
    /// the ladder climbs only as far as the fault needs, the first healthy round afterwards is logged, and an
    /// adapter it cannot heal is reported unhealthy in `STATUS=`.
    @Suite("Healing ladder through keepalive run", .serialized)
    struct HealingEndToEndTests {
        /// Two sensors on hci0 at 1-s ticks, BlueZ's timings shortened; `healing` and `adapter_power` from `extra`.
        static func withDaemon(
            extra: String, notify: Bool = false,
            _ body: @Sendable (BlueZSimulator, CommandProcess, FakeNotifySocket?) async throws -> Void
        ) async throws {
            try await PrivateBus.with { bus in
                var configuration = BlueZSimulator.Configuration(adapters: ["hci0"], devices: .sensors(count: 2))
                configuration.latencies.disconnect = .milliseconds(100)
                configuration.latencies.connectAbort = .milliseconds(200)
                let simulator = try await BlueZSimulator.start(on: .address(bus.address), configuration: configuration)
                let file = try TemporaryFile(
                    name: "keepalive.yaml", contents: CLITests.configuration(devices: 2, interval: "1s", extra: extra))
                defer { file.remove() }
                let socket = notify ? try FakeNotifySocket(directory: file.directory) : nil
                defer { socket?.stop() }
                let process = try CommandProcess(
                    ["run", "--config", file.path, "--bus", bus.address],
                    environment: socket.map { ["NOTIFY_SOCKET": $0.path] } ?? [:])
                defer { process.terminate() }
                try await waitUntil("both sensors polled", timeout: .seconds(20)) {
                    CLITests.records(process.standardOutput).filter { $0.line.contains("\"result\":\"newData\"") }.count
                        >= 2
                }
                try await body(simulator, process, socket)
                process.signal(SIGTERM)
                #expect(
                    try await process.waitForExit(within: .seconds(10)) == 0, "\(process.standardError.suffix(3_000))")
                let records = CLITests.records(process.standardOutput)
                #expect(records.map(\.seq) == Array(0..<records.count), "seq not contiguous")
                try await CLITests.expectAllDisconnected(simulator)
                await simulator.stop()
            }
        }

        static func polledSince(_ process: CommandProcess, _ count: Int) -> Bool {
            CLITests.records(process.standardOutput).dropFirst(count).contains {
                $0.line.contains("\"result\":\"newData\"")
            }
        }

        /// The log lines of the ladder's climb to its first power-cycle: from the last healthy round before it (a
        /// climb starts from one) to the power-cycle's line; nil without a power-cycle.
        static func climbToPowerCycle(in log: String) -> ArraySlice<Substring>? {
            let lines = log.split(separator: "\n")
            guard let cycled = lines.firstIndex(where: { $0.contains("healing: power-cycling the adapter") }) else {
                return nil
            }
            let start = lines[..<cycled].lastIndex { $0.contains("adapter healthy again") }.map { $0 + 1 } ?? 0
            return lines[start...cycled]
        }

        @Test func anAdapterWedgedUntilPowerCycledIsPowerCycledOnceAndPollingResumes() async throws {
            try await Self.withDaemon(extra: "healing:\n  failing_rounds: 2\n  cooldown: 1s\n") {
                simulator, process, _ in
                // On a loaded machine the first windows can expire: the ladder may have cleared the adapter, and
                // logged it healthy again, before the wedge; under ThreadSanitizer it once climbed to a power-cycle
                // then. Only what comes after the mark answers the wedge, and the power-ons are counted from it.
                let mark = process.mark()
                let powerOnsBefore = simulator.powerOns()
                try simulator.wedge()
                let wedgedAt = CLITests.records(process.standardOutput).count
                // A power-off clears the wedge, and the power-on after it is counted.
                try await waitUntil("the adapter power-cycled by the daemon", timeout: .seconds(60)) {
                    !simulator.isWedged() && simulator.powerOns() > powerOnsBefore
                }
                let powerOnsAfter = simulator.powerOns()
                let cycledAt = CLITests.records(process.standardOutput).count
                try await waitUntil("polling resumed", timeout: .seconds(30)) { Self.polledSince(process, cycledAt) }
                // A healthy round needs both devices' records; under AddressSanitizer 10 s (x3) once ran out.
                do {
                    try await waitUntil("the recovery from the power-cycle logged", timeout: .seconds(30)) {
                        process.standardError(since: mark).contains("first healthy round after a power-cycle")
                    }
                } catch {
                    let log = process.standardError(since: mark).suffix(3_000)
                    Issue.record("\(error); the daemon's log since the wedge: \(log)")
                    throw error
                }
                let log = process.standardError
                // Clear first, then the power-cycle (in the climb that led to it); no further rung.
                let climb = try #require(Self.climbToPowerCycle(in: log), "\(log.suffix(3_000))")
                #expect(
                    climb.contains { $0.contains("healing: stopping a stuck discovery") },
                    "the power-cycle without a clear first: \(climb.joined(separator: "\n"))")
                let sinceWedge = process.standardError(since: mark)
                #expect(!sinceWedge.contains("restarting bluetooth.service"))
                #expect(!sinceWedge.contains("adapter unhealthy"))
                #expect(simulator.powerOns() == powerOnsAfter, "power-cycled more than needed")
                // The records kept every failure in between.
                let failed = CLITests.records(process.standardOutput).dropFirst(wedgedAt).filter {
                    $0.line.contains("\"code\":\"connectionAborted\"")
                }
                #expect(failed.count >= 4)
                // …and say what the ladder did, and why, in the next record of the adapter's devices: the
                // power-cycle, then the recovery from it (an earlier recovery's note may come after the wedge).
                let recovered =
                    "\"healing\":{\"action\":\"reportRecovered\",\"why\":\"first healthy round after a power-cycle\""
                try await waitUntil("the records carry the healing steps", timeout: .seconds(10)) {
                    let lines = CLITests.records(process.standardOutput).dropFirst(wedgedAt).map(\.line)
                    guard
                        let cycle = lines.firstIndex(where: {
                            $0.contains("\"healing\":{\"action\":\"powerCycle\",\"why\":\"")
                        })
                    else { return false }
                    return lines[cycle...].contains { $0.contains(recovered) }
                }
                let cycle = try #require(
                    CLITests.records(process.standardOutput).first { $0.line.contains("\"action\":\"powerCycle\"") })
                #expect(cycle.line.contains("failing rounds"), "\(cycle.line)")
            }
        }

        @Test func anAdapterPoweredOffBehindOurBackIsPoweredOnWhenConfigured() async throws {
            try await Self.withDaemon(extra: "adapter_power: on\n") { simulator, process, _ in
                let mark = process.mark()
                try await simulator.setPowered(false)
                let offAt = CLITests.records(process.standardOutput).count
                try await waitUntil("the daemon powered the adapter on", timeout: .seconds(30)) {
                    simulator.isPowered()
                }
                try await waitUntil("polling resumed", timeout: .seconds(30)) { Self.polledSince(process, offAt) }
                // The log line comes one D-Bus round trip before the power-on, and "polling resumed" can be a
                // record of a poll that was ending at the power-off: wait for the line itself.
                try await waitUntil("the power-on logged", timeout: .seconds(10)) {
                    let log = process.standardError(since: mark)
                    return log.contains("healing: powering the adapter on")
                        && log.contains("the adapter is powered off and adapter_power is on")
                }
                #expect(!process.standardError(since: mark).contains("power-cycling"))
            }
        }

        @Test func anAdapterPoweredOffWithoutAdapterPowerIsReportedUnhealthyInStatusUntilItIsBack() async throws {
            try await Self.withDaemon(extra: "healing:\n  failing_rounds: 2\n", notify: true) {
                simulator, process, notify in
                let notify = try #require(notify)
                try await simulator.setPowered(false)
                try await waitUntil("STATUS says hci0 is unhealthy", timeout: .seconds(30)) {
                    notify.firstIndex(containing: "STATUS=hci0 unhealthy") != nil
                }
                let status = try #require(notify.messages.first { $0.text.contains("STATUS=hci0 unhealthy") }).text
                #expect(status.contains("`adapter_power: on` would power it on"), "\(status)")
                // On a loaded machine an early clear may have been followed by "adapter healthy again" already.
                let mark = process.mark()
                #expect(!simulator.isPowered(), "the daemon touched the power without adapter_power: on")
                #expect(simulator.powerOns() == 0)

                try await simulator.setPowered(true)
                let unhealthyIndex = try #require(notify.firstIndex(containing: "STATUS=hci0 unhealthy"))
                try await waitUntil("STATUS back to polling", timeout: .seconds(30)) {
                    notify.messages.dropFirst(unhealthyIndex + 1).contains {
                        $0.text.hasPrefix("STATUS=polling 2 devices")
                    }
                }
                // The notification can overtake the log line, which reaches the test through a pipe and a reader.
                try await waitUntil("the log says the adapter is healthy again", timeout: .seconds(10)) {
                    process.standardError(since: mark).contains("first healthy round after being reported unhealthy")
                }
            }
        }
    }
}

/// Hotplug (issue #15): the adapter unplugged and back under a new index is followed by its address.
extension MonthsWithoutAPersonTests.HealingEndToEndTests {
    @Test func anAdapterBackUnderANewIndexIsFollowedAndPollingResumes() async throws {
        try await Self.withDaemon(extra: "") { simulator, process, _ in
            try await simulator.replug(adapter: "hci0", as: "hci1")
            #expect(simulator.adapterNames == ["hci1"])
            let replugged = CLITests.records(process.standardOutput).count
            try await waitUntil("a poll failed for the missing adapter", timeout: .seconds(20)) {
                CLITests.records(process.standardOutput).dropFirst(replugged).contains {
                    $0.line.contains("\"code\":\"adapterNotFound\"")
                }
            }
            try await waitUntil("polling resumed through hci1", timeout: .seconds(30)) {
                Self.polledSince(process, replugged)
            }
            // Logged after the failed poll's record, and "polling resumed" can be a record of a poll that was
            // ending at the replug: wait for the line itself.
            try await waitUntil("the daemon follows hci1", timeout: .seconds(10)) {
                let log = process.standardError
                return log.contains("adapter back under another name: following it") && log.contains("now=hci1")
            }
            // Records keep the configured name.
            let resumed = try #require(
                CLITests.records(process.standardOutput).dropFirst(replugged).first {
                    $0.line.contains("\"result\":\"newData\"")
                })
            #expect(resumed.line.contains("\"adapter\":\"hci0\""), "\(resumed.line)")
            #expect(!process.standardError.contains("power-cycling"))
        }
    }
}

/// bluetoothd gone (issue #15): a fake systemd on the private bus answers `RestartUnit` by restarting the
/// simulator, so the daemon's real call (destination, path, interface, signature) is what is tested.
extension MonthsWithoutAPersonTests.HealingEndToEndTests {
    /// Owns org.freedesktop.systemd1 with Manager.RestartUnit(ss) → o; `onRestart` runs after the reply.
    static func fakeSystemd(
        on bus: PrivateBus, calls: Locked<[[String]]>, onRestart: @escaping @Sendable () async -> Void
    ) async throws -> DBusConnection {
        let connection = try await DBusConnection(bus: .address(bus.address))
        try await connection.export(
            DBusObject(interfaces: [
                DBusInterface(
                    "org.freedesktop.systemd1.Manager",
                    methods: [
                        DBusMethod("RestartUnit", in: "ss", out: "o", inNames: ["name", "mode"], outNames: ["job"]) {
                            call in
                            let (unit, mode) = try call.arguments.decode(String.self, String.self)
                            calls.withLock { $0.append([unit, mode]) }
                            call.afterReply { _ in await onRestart() }
                            return [.objectPath("/org/freedesktop/systemd1/job/1")]
                        }
                    ])
            ]),
            at: "/org/freedesktop/systemd1")
        _ = try await connection.requestName("org.freedesktop.systemd1")
        return connection
    }

    @Test func bluetoothdGoneIsRestartedThroughSystemdWhenAllowedAndPollingResumes() async throws {
        let calls = Locked<[[String]]>([])
        try await PrivateBus.with { bus in
            var configuration = BlueZSimulator.Configuration(adapters: ["hci0"], devices: .sensors(count: 2))
            configuration.latencies.disconnect = .milliseconds(100)
            configuration.latencies.restart = .milliseconds(200)
            let simulator = try await BlueZSimulator.start(on: .address(bus.address), configuration: configuration)
            let systemd = try await Self.fakeSystemd(on: bus, calls: calls) { try? await simulator.restart() }
            let file = try TemporaryFile(
                name: "keepalive.yaml",
                contents: CLITests.configuration(
                    devices: 2, interval: "1s", extra: "healing:\n  failing_rounds: 2\n  restart_bluetoothd: true\n"))
            defer { file.remove() }
            let process = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { process.terminate() }
            try await waitUntil("both sensors polled", timeout: .seconds(20)) {
                CLITests.records(process.standardOutput).filter { $0.line.contains("\"result\":\"newData\"") }.count
                    >= 2
            }
            // On a loaded machine the ladder may have cleared the adapter and logged it healthy again at start.
            let mark = process.mark()
            await simulator.crash()  // bluetoothd gone, and nobody brings it back but the daemon
            let crashedAt = CLITests.records(process.standardOutput).count
            try await waitUntil("RestartUnit called", timeout: .seconds(30)) { !calls.withLock { $0 }.isEmpty }
            try await waitUntil("polling resumed", timeout: .seconds(30)) { Self.polledSince(process, crashedAt) }
            try await waitUntil("the recovery from the restart logged", timeout: .seconds(10)) {
                process.standardError(since: mark).contains("first healthy round after restarting bluetoothd")
            }
            #expect(calls.withLock { $0 } == [["bluetooth.service", "replace"]])
            let log = process.standardError(since: mark)
            #expect(log.contains("healing: restarting bluetooth.service through systemd"), "\(log.suffix(3_000))")
            #expect(!log.contains("power-cycling"), "\(log.suffix(3_000))")
            #expect(log.contains("first healthy round after restarting bluetoothd"), "\(log.suffix(3_000))")
            process.signal(SIGTERM)
            #expect(try await process.waitForExit(within: .seconds(10)) == 0)
            await systemd.close()
            await simulator.stop()
        }
    }

    @Test func bluetoothdGoneWithoutRestartIsUnhealthyInStatusUntilItIsBack() async throws {
        try await Self.withDaemon(extra: "healing:\n  failing_rounds: 2\n", notify: true) {
            simulator, process, notify in
            let notify = try #require(notify)
            await simulator.crash()
            try await waitUntil("STATUS says hci0 is unhealthy", timeout: .seconds(30)) {
                notify.firstIndex(containing: "STATUS=hci0 unhealthy") != nil
            }
            let status = try #require(notify.messages.first { $0.text.contains("STATUS=hci0 unhealthy") }).text
            #expect(status.contains("healing.restart_bluetoothd is off"), "\(status)")
            let unhealthyIndex = try #require(notify.firstIndex(containing: "STATUS=hci0 unhealthy"))
            try await simulator.restart()
            try await waitUntil("STATUS back to polling", timeout: .seconds(30)) {
                notify.messages.dropFirst(unhealthyIndex + 1).contains { $0.text.hasPrefix("STATUS=polling 2 devices") }
            }
        }
    }
}

/// Discovery stuck (issue #15): devices BlueZ has forgotten must be found again, and the scan finds nothing.
extension MonthsWithoutAPersonTests.HealingEndToEndTests {
    @Test func aStuckScanThatFindsNothingClimbsToThePowerCycleAndPollingResumes() async throws {
        try await Self.withDaemon(extra: "healing:\n  failing_rounds: 2\n  cooldown: 1s\n") { simulator, process, _ in
            // On a loaded machine the ladder may have cleared the adapter and logged it healthy again at start.
            let mark = process.mark()
            try simulator.stickDiscovery()
            // BlueZ forgets both devices (their objects go); they still advertise, so a working scan would find them.
            for number in 1...2 {
                try await simulator.inject(.vanish, device: "C0:FF:EE:00:00:0\(number)")
                try simulator.clearFault("vanish", device: "C0:FF:EE:00:00:0\(number)")
            }
            let stuckAt = CLITests.records(process.standardOutput).count
            try await waitUntil("the adapter power-cycled by the daemon", timeout: .seconds(90)) {
                simulator.powerOns() >= 1
            }
            let cycledAt = CLITests.records(process.standardOutput).count
            try await waitUntil("polling resumed", timeout: .seconds(30)) { Self.polledSince(process, cycledAt) }
            try await waitUntil("the recovery from the power-cycle logged", timeout: .seconds(10)) {
                process.standardError(since: mark).contains("first healthy round after a power-cycle")
            }
            let log = process.standardError
            // Clear first, then the power-cycle (in the climb that led to it).
            let climb = try #require(Self.climbToPowerCycle(in: log), "\(log.suffix(3_000))")
            #expect(
                climb.contains { $0.contains("healing: stopping a stuck discovery") },
                "the power-cycle without a clear first: \(climb.joined(separator: "\n"))")
            // The ladder's own lines, not the polls' warnings (which name their error too).
            #expect(
                climb.contains { $0.contains("healing: ") && $0.contains("deviceNotFound") },
                "the why names what the polls said: \(climb.joined(separator: "\n"))")
            #expect(simulator.powerOns() == 1)
            #expect(!process.standardError(since: mark).contains("restarting bluetooth.service"))
            let notFound = CLITests.records(process.standardOutput).dropFirst(stuckAt).filter {
                $0.line.contains("\"code\":\"deviceNotFound\"")
            }
            #expect(notFound.count >= 2)
        }
    }
}
