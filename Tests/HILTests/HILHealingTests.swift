import DBus
import LocalServices
import TestHarness
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The healing ladder (README "Healing") against the environment's bluetoothd: the simulator (`make hil`) or the
/// real one in the qemu lab (`make lab`). Each test runs `keepalive run` and breaks the adapter or bluetoothd
/// behind its back. In the suite's own serialized order: a test that powers the adapter off must not run beside
/// one that polls through it.
extension HILTests {
    static func healingConfiguration(_ environment: HILEnvironment, extra: String) -> String {
        """
        interval: 5s
        jitter: 0s
        window_budget: 4s
        low_power: {mode: off}
        adapter: \(environment.adapter)
        \(extra)
        devices:
          - name: hil
            address: \(environment.peripheral.address)
            read: [\(environment.counter)]
        """
    }

    /// The daemon's records so far: (tick, failed, error code).
    static func records(_ daemon: CommandProcess) -> [(tick: Int, failed: Bool, code: String?)] {
        daemon.standardOutput.split(separator: "\n").map { line in
            let text = String(line)
            func field(_ name: String) -> String? {
                guard let range = text.firstRange(of: "\"\(name)\":") else { return nil }
                let rest = text[range.upperBound...]
                return rest.first == "\""
                    ? String(rest.dropFirst().prefix { $0 != "\"" }) : String(rest.prefix { $0 != "," && $0 != "}" })
            }
            return (Int(field("tick") ?? "") ?? -1, text.contains("\"result\":\"failed\""), field("code"))
        }
    }

    static func firstSuccess(_ daemon: CommandProcess, after index: Int) -> Int? {
        records(daemon).enumerated().first { $0.offset >= index && !$0.element.failed }?.offset
    }

    /// Waits for `condition`; on a timeout the daemon's records and log go into the failure.
    static func wait(
        _ what: String, _ daemon: CommandProcess, within limit: Duration, _ condition: @escaping @Sendable () -> Bool
    ) async throws {
        do {
            try await waitUntil(what, timeout: limit, condition)
        } catch {
            throw HILFailure(
                "\(error)\nrecords:\n\(daemon.standardOutput.suffix(3_000))"
                    + "\nlog:\n\(daemon.standardError.suffix(5_000))"
            )
        }
    }

    @Test(
        .enabled(
            if: HILEnvironment.current.flatMap { try? $0.get() }.map { $0.adapterFaults } ?? true,
            "KEEPALIVE_HIL_ADAPTER_FAULTS is not 1"))
    func anAdapterPoweredOffBehindTheDaemonsBackIsPoweredOnAndPollingResumesByTheNextTick() async throws {
        let environment = try HILEnvironment.load()
        // BlueZ knows the peripheral and a link works before the daemon starts (a lab just booted may need more
        // than one 4-s window to discover it, and the daemon then backs off: one run waited 90 s in vain).
        try await HILSession.with { session in _ = try await session.connect() }
        let file = try TemporaryFile(
            name: "hil.yaml", contents: Self.healingConfiguration(environment, extra: "adapter_power: on"))
        defer { file.remove() }
        let daemon = try CommandProcess(["run", "--config", file.path, "--bus", environment.busName, "--output", "-"])
        defer { daemon.terminate() }
        try await Self.wait("a first successful poll", daemon, within: .seconds(90)) {
            Self.firstSuccess(daemon, after: 0) != nil
        }

        let adapterPath = try ObjectPath("/org/bluez/\(environment.adapter)")
        let connection = try await DBusConnection(bus: environment.bus, timeout: .seconds(10))
        let before = Self.records(daemon).count
        let mark = daemon.mark()
        let started = ContinuousClock.now
        try await connection.setProperty(
            "Powered", interface: "org.bluez.Adapter1", value: .boolean(false), destination: "org.bluez",
            path: adapterPath)
        try await Self.wait("the daemon powers the adapter on", daemon, within: .seconds(60)) {
            daemon.standardError(since: mark).contains("healing: powering the adapter on")
        }
        try await Self.wait("a successful poll after the power-off", daemon, within: .seconds(60)) {
            Self.firstSuccess(daemon, after: before) != nil
        }
        let elapsed = HILReport.milliseconds(since: started)
        let records = Self.records(daemon)
        let success = try #require(Self.firstSuccess(daemon, after: before))
        let firstFailure = records[before...].firstIndex { $0.failed } ?? success
        // The tick that met the powered-off adapter failed (or the power-off fell between polls); the next one worked.
        #expect(
            records[success].tick <= records[firstFailure].tick + 2,
            """
                polling resumed at tick \(records[success].tick), the adapter was found off at tick \
                \(records[firstFailure].tick)
                """
        )
        let powered = try await connection.getProperty(
            "Powered", interface: "org.bluez.Adapter1", destination: "org.bluez", path: adapterPath)
        #expect(powered.unwrappingVariants.boolean == true, "the adapter is on again")
        await connection.close()
        daemon.signal(SIGTERM)
        #expect(try await daemon.waitForExit(within: .seconds(30)) == 0, "\(daemon.standardError.suffix(2_000))")
        HILReport.line(
            """
                adapter powered off: powered on by the daemon, polling again after \(elapsed) (tick \
                \(records[firstFailure].tick) → \(records[success].tick))
                """
        )
    }

    @Test(
        .enabled(
            if: HILEnvironment.current.flatMap { try? $0.get() }.map { $0.stopBluetoothd != nil } ?? true,
            "KEEPALIVE_HIL_STOP_BLUETOOTHD is not set"))
    func bluetoothdStoppedForAMinuteIsReportedUnhealthyWithTypedRecordsAndPollingRecovers() async throws {
        let environment = try HILEnvironment.load()
        guard let stop = environment.stopBluetoothd else { return }
        try await HILSession.with { session in _ = try await session.connect() }
        // The ladder quicker than by default (2 failing rounds, a 5-s cooldown), so the minute shows it all;
        // restarting bluetoothd is not allowed (the default): the ladder ends at "unhealthy".
        let file = try TemporaryFile(
            name: "hil.yaml",
            contents: Self.healingConfiguration(environment, extra: "healing: {failing_rounds: 2, cooldown: 5s}"))
        defer { file.remove() }
        let daemon = try CommandProcess(["run", "--config", file.path, "--bus", environment.busName, "--output", "-"])
        defer { daemon.terminate() }
        try await Self.wait("a first successful poll", daemon, within: .seconds(90)) {
            Self.firstSuccess(daemon, after: 0) != nil
        }

        let before = Self.records(daemon).count
        // A lab just booted may fail the first windows: the ladder may have acted, and recovered, before this.
        let mark = daemon.mark()
        let started = ContinuousClock.now
        try await HILShell.run("\(stop) 60")
        try await Self.wait("reported unhealthy", daemon, within: .seconds(60)) {
            daemon.standardError(since: mark).contains("adapter unhealthy")
        }
        let unhealthy = HILReport.milliseconds(since: started)
        try await Self.wait("a successful poll once bluetoothd is back", daemon, within: .seconds(180)) {
            Self.firstSuccess(daemon, after: before) != nil
        }
        let recovered = HILReport.milliseconds(since: started)
        try await Self.wait("the recovery from being unhealthy logged", daemon, within: .seconds(30)) {
            daemon.standardError(since: mark).contains("first healthy round after being reported unhealthy")
        }
        let records = Self.records(daemon)
        let outage = records[before..<(Self.firstSuccess(daemon, after: before) ?? records.count)]
        #expect(!outage.isEmpty, "the minute without bluetoothd left records")
        // Typed: every failure says what kind it was (no catch-all).
        let codes = Set(outage.compactMap(\.code))
        #expect(outage.allSatisfy { $0.failed && $0.code != nil && $0.code != "failed" }, "codes \(codes)")
        daemon.signal(SIGTERM)
        #expect(try await daemon.waitForExit(within: .seconds(30)) == 0, "\(daemon.standardError.suffix(2_000))")
        HILReport.line(
            """
                bluetoothd stopped for 60 s: unhealthy after \(unhealthy), polling again after \(recovered); \
                \(outage.count) records in between, codes \(codes.sorted())
                """
        )
    }
}
