import BlueZSimulator
import DBus
import LocalServices
import TestHarness
import Foundation
import KeepAliveDaemon
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `keepalive doctor` against a private bus with the BlueZ simulator, fixtures for sysfs and bluetoothd, and this
/// machine's kernel (which has no Bluetooth).
@Suite struct DoctorTests {
    static let names = [
        DoctorCheck.Name.systemBus, DoctorCheck.Name.bluez, DoctorCheck.Name.permission, DoctorCheck.Name.adapters,
        DoctorCheck.Name.advertisements, DoctorCheck.Name.rfkill, DoctorCheck.Name.controllers,
        DoctorCheck.Name.powerSource,
        DoctorCheck.Name.configuration,
    ]

    // MARK: D-Bus checks against the simulator

    @Test func everyDBusCheckPassesAgainstTheSimulatorAndTheAdapterIsListedWithItsAddress() async throws {
        try await withSimulator { bus, _, fixtures in
            let checks = await Doctor(options: fixtures.options(bus: bus.address)).run()
            #expect(checks.map(\.name) == Self.names)
            for name in [
                DoctorCheck.Name.systemBus, DoctorCheck.Name.bluez, DoctorCheck.Name.permission,
                DoctorCheck.Name.adapters,
            ] {
                #expect(check(name, in: checks).status == .ok, "\(check(name, in: checks))")
            }
            #expect(check(DoctorCheck.Name.bluez, in: checks).detail == "org.bluez is on the bus; BlueZ 5.66")
            #expect(check(DoctorCheck.Name.adapters, in: checks).detail == "hci0 00:1A:7D:DA:71:00 on")
            #expect(
                check(DoctorCheck.Name.advertisements, in: checks).detail
                    == "hci0: active discovery (bluetoothd offers no passive monitoring without --experimental)")
            #expect(check(DoctorCheck.Name.permission, in: checks).detail.contains("may call org.bluez"))
        }
    }

    @Test func aPoweredOffAdapterFailsWithThePowerOnFix() async throws {
        try await withSimulator { bus, simulator, fixtures in
            try await simulator.setPowered(false)
            let checks = await Doctor(options: fixtures.options(bus: bus.address)).run()
            let adapters = check(DoctorCheck.Name.adapters, in: checks)
            #expect(adapters.status == .failed)
            #expect(adapters.detail == "hci0 00:1A:7D:DA:71:00 off")
            #expect(adapters.fix?.contains("bluetoothctl power on") == true, "\(adapters)")
        }
    }

    @Test func anRfkillBlockedAdapterFailsWithTheUnblockFix() async throws {
        try await withSimulator { bus, simulator, fixtures in
            try await simulator.setBlocked(true)
            let checks = await Doctor(options: fixtures.options(bus: bus.address)).run()
            let adapters = check(DoctorCheck.Name.adapters, in: checks)
            #expect(adapters.status == .failed)
            #expect(adapters.detail.contains("blocked by rfkill"))
            #expect(adapters.fix?.hasPrefix("`rfkill unblock bluetooth`") == true, "\(adapters)")
        }
    }

    @Test func aNamedAdapterThatIsMissingFailsAndListsThePresentOnes() async throws {
        try await withSimulator { bus, _, fixtures in
            var options = fixtures.options(bus: bus.address)
            options.adapter = "hci1"
            let adapters = check(DoctorCheck.Name.adapters, in: await Doctor(options: options).run())
            #expect(adapters.status == .failed)
            #expect(adapters.detail == "hci1 not found; present: hci0 00:1A:7D:DA:71:00 on")
            #expect(adapters.fix?.contains("hci0") == true)
        }
    }

    @Test func anUnpoweredSpareAdapterIsAWarningThatNamesItsObject() async throws {
        try await withSimulator(adapters: ["hci0", "hci1"]) { bus, simulator, fixtures in
            try await simulator.setPowered(false, adapter: "hci1")
            let checks = await Doctor(options: fixtures.options(bus: bus.address)).run()
            let adapters = check(DoctorCheck.Name.adapters, in: checks)
            #expect(adapters.status == .warning)
            #expect(adapters.detail == "hci0 00:1A:7D:DA:71:00 on, hci1 00:1A:7D:DA:71:01 off")
            // With two adapters bluetoothctl's "default" one is a coin toss: the fix names the object.
            #expect(adapters.fix == "`busctl set-property org.bluez /org/bluez/hci1 org.bluez.Adapter1 Powered b true`")
        }
    }

    @Test func noAdapterAtAllFails() async throws {
        try await withSimulator(adapters: []) { bus, _, fixtures in
            let checks = await Doctor(options: fixtures.options(bus: bus.address)).run()
            let adapters = check(DoctorCheck.Name.adapters, in: checks)
            #expect(adapters.status == .failed)
            #expect(adapters.detail.hasPrefix("no Bluetooth adapter"))
            #expect(adapters.fix?.contains("rfkill list") == true)
        }
    }

    @Test func withoutBluetoothdOnTheBusBlueZFailsAndItsDependentsAreSkipped() async throws {
        let fixtures = try Fixtures()
        defer { fixtures.remove() }
        try await PrivateBus.with { bus in
            let checks = await Doctor(options: fixtures.options(bus: bus.address)).run()
            #expect(check(DoctorCheck.Name.systemBus, in: checks).status == .ok)
            let bluez = check(DoctorCheck.Name.bluez, in: checks)
            #expect(bluez.status == .failed)
            #expect(bluez.detail.contains("org.bluez is not on the bus"))
            #expect(bluez.detail.contains("bluetoothd 5.66 is installed"))
            #expect(bluez.fix?.contains("systemctl start bluetooth") == true)
            for name in [DoctorCheck.Name.permission, DoctorCheck.Name.adapters, DoctorCheck.Name.advertisements] {
                #expect(check(name, in: checks).status == .skipped)
                #expect(check(name, in: checks).detail == "needs org.bluez on the bus")
            }
        }
    }

    // MARK: The bus itself

    @Test func aMissingBusSocketFailsQuicklyAndSkipsTheDBusChecks() async throws {
        let fixtures = try Fixtures()
        defer { fixtures.remove() }
        let clock = ContinuousClock()
        let start = clock.now
        let checks = await Doctor(options: fixtures.options(bus: "unix:path=/nonexistent/socket")).run()
        // "Quickly" is what the failure says: the connect's own error, not a timeout's (libdbus's 25-s default is
        // what this guards against). The wall clock is only a give-up: in the whole suite on two loaded cores the
        // doctor has taken 16.5 s, against 10 ms alone.
        #expect(clock.now - start < .seconds(60 * sanitizerSlowdown * sanitizerSlowdown))
        #expect(checks.map(\.name) == Self.names)
        let bus = check(DoctorCheck.Name.systemBus, in: checks)
        #expect(bus.status == .failed)
        #expect(bus.detail.contains("/nonexistent/socket: No such file or directory"), "\(bus)")
        #expect(!bus.detail.contains("no answer"), "\(bus)")
        #expect(bus.fix?.contains("systemctl start dbus") == true)
        #expect(bus.fix?.contains("DBUS_SYSTEM_BUS_ADDRESS") == true)
        for name in [
            DoctorCheck.Name.bluez, DoctorCheck.Name.permission, DoctorCheck.Name.adapters,
            DoctorCheck.Name.advertisements,
        ] {
            #expect(check(name, in: checks).status == .skipped)
            #expect(check(name, in: checks).detail == "needs the system bus")
        }
        #expect(!Doctor.passed(checks))
    }

    @Test func aBusSocketThatNeverAnswersFailsAtTheTimeout() async throws {
        let fixtures = try Fixtures()
        defer { fixtures.remove() }
        // A listening socket nobody accepts on: libdbus would wait for the authentication forever, holding its
        // process-wide bus lock (every other connection opened meanwhile waits too), so the timeout is short and
        // closing the listener at the end resets the abandoned connection.
        let path = fixtures.directory + "/silent.sock"
        let listener = try listeningSocket(at: path)
        defer { close(listener) }
        var options = fixtures.options(bus: "unix:path=" + path)
        options.timeout = .milliseconds(500)
        let clock = ContinuousClock()
        let start = clock.now
        let checks = await Doctor(options: options).run()
        // That the doctor's own 500-ms timeout ended the wait, not libdbus's 25-s default, is what the detail says
        // (only that timeout writes it). The wall clock is only a give-up, as above.
        #expect(clock.now - start < .seconds(60 * sanitizerSlowdown * sanitizerSlowdown))
        let bus = check(DoctorCheck.Name.systemBus, in: checks)
        #expect(bus.status == .failed)
        #expect(bus.detail.contains("no answer from the bus at unix:path=\(path) within 500ms"), "\(bus)")
        #expect(check(DoctorCheck.Name.bluez, in: checks).status == .skipped)
    }

    // MARK: BlueZ's version

    @Test func anOldBlueZIsAWarningWithTheReason() async throws {
        try await withSimulator { bus, _, fixtures in
            var options = fixtures.options(bus: bus.address)
            options.bluetoothdPaths = [try fixtures.script("bluetoothd-old", "echo 5.50")]
            let bluez = check(DoctorCheck.Name.bluez, in: await Doctor(options: options).run())
            #expect(bluez.status == .warning)
            #expect(bluez.detail.contains("BlueZ 5.50 is older than 5.55"))
            #expect(bluez.fix?.contains("upgrade bluez") == true)
        }
    }

    @Test func aBluetoothdThatHangsOnVersionIsKilledAtTheBound() async throws {
        try await withSimulator { bus, _, fixtures in
            var options = fixtures.options(bus: bus.address)
            let hanging = try fixtures.script("bluetoothd-hangs", "exec sleep 60")
            options.bluetoothdPaths = ["/nonexistent/bluetoothd", hanging]
            options.versionTimeout = .milliseconds(300)
            let clock = ContinuousClock()
            let start = clock.now
            let bluez = check(DoctorCheck.Name.bluez, in: await Doctor(options: options).run())
            // The detail says the 300-ms bound ended the wait; the wall clock, under the script's 60 s, is a
            // give-up that leaves room for a loaded machine (the doctor has taken 16.5 s in the whole suite).
            #expect(clock.now - start < .seconds(45 * sanitizerSlowdown * sanitizerSlowdown))
            #expect(bluez.status == .ok)
            #expect(bluez.detail.contains("BlueZ version unknown (`\(hanging) --version` did not answer within 300ms)"))
        }
    }

    // MARK: Host checks

    @Test func aSoftBlockedRfkillSwitchFailsWithTheUnblockFix() async throws {
        let fixtures = try Fixtures()
        defer { fixtures.remove() }
        try fixtures.file("rfkill/rfkill0/type", "wlan")
        try fixtures.file("rfkill/rfkill0/soft", "1")
        try fixtures.file("rfkill/rfkill1/type", "bluetooth")
        try fixtures.file("rfkill/rfkill1/name", "hci0")
        try fixtures.file("rfkill/rfkill1/soft", "1")
        try fixtures.file("rfkill/rfkill1/hard", "0")
        let rfkill = check(DoctorCheck.Name.rfkill, in: await Doctor(options: fixtures.options()).run())
        #expect(rfkill.status == .failed)
        #expect(rfkill.detail == "rfkill1 (hci0) soft-blocked")
        #expect(rfkill.fix == "`rfkill unblock bluetooth`")
    }

    @Test func aHardBlockedRfkillSwitchNamesTheHardwareSwitch() async throws {
        let fixtures = try Fixtures()
        defer { fixtures.remove() }
        try fixtures.file("rfkill/rfkill0/type", "bluetooth")
        try fixtures.file("rfkill/rfkill0/soft", "0")
        try fixtures.file("rfkill/rfkill0/hard", "1")
        let rfkill = check(DoctorCheck.Name.rfkill, in: await Doctor(options: fixtures.options()).run())
        #expect(rfkill.status == .failed)
        #expect(rfkill.fix?.contains("hardware switch") == true)
    }

    @Test func rfkillWithoutBluetoothSwitchesIsSkippedAndUnblockedIsOk() async throws {
        let fixtures = try Fixtures()
        defer { fixtures.remove() }
        let none = check(DoctorCheck.Name.rfkill, in: await Doctor(options: fixtures.options()).run())
        #expect(none.status == .skipped)
        #expect(none.detail.hasPrefix("no rfkill switches for Bluetooth"))
        try fixtures.file("rfkill/rfkill0/type", "bluetooth")
        try fixtures.file("rfkill/rfkill0/soft", "0")
        try fixtures.file("rfkill/rfkill0/hard", "0")
        let unblocked = check(DoctorCheck.Name.rfkill, in: await Doctor(options: fixtures.options()).run())
        #expect(unblocked.status == .ok)
        #expect(unblocked.detail == "rfkill0 unblocked")
    }

    @Test func powerSuppliesInSysfsAreAPowerSource() async throws {
        let fixtures = try Fixtures()
        defer { fixtures.remove() }
        try fixtures.file("power_supply/AC/type", "Mains")
        try fixtures.file("power_supply/AC/online", "1")
        try fixtures.file("power_supply/BAT0/type", "Battery")
        try fixtures.file("power_supply/BAT0/capacity", "87")
        try fixtures.file("power_supply/BAT0/status", "Charging")
        // A BLE mouse's battery is not the host's.
        try fixtures.file("power_supply/hid-mouse-battery/type", "Battery")
        try fixtures.file("power_supply/hid-mouse-battery/scope", "Device")
        try fixtures.file("power_supply/hid-mouse-battery/capacity", "40")
        let power = check(DoctorCheck.Name.powerSource, in: await Doctor(options: fixtures.options()).run())
        #expect(power.status == .ok)
        #expect(power.detail == "\(fixtures.directory)/power_supply: AC online, BAT0 87% Charging")
    }

    @Test func noPowerSourceIsOnlyAWarning() async throws {
        let fixtures = try Fixtures()
        defer { fixtures.remove() }
        let checks = await Doctor(options: fixtures.options()).run()
        let power = check(DoctorCheck.Name.powerSource, in: checks)
        #expect(power.status == .warning)
        #expect(power.detail == "no power source: polling stays at the normal interval")
    }

    @Test func upowerAndThePowerProfileOnTheBusAreReported() async throws {
        let fixtures = try Fixtures()
        defer { fixtures.remove() }
        try fixtures.file("power_supply/AC/type", "Mains")
        try fixtures.file("power_supply/AC/online", "1")
        try await PrivateBus.with { bus in
            let upower = try await bus.connect()
            try await upower.export(
                DBusObject(interfaces: [
                    DBusInterface(
                        "org.freedesktop.UPower",
                        properties: [
                            DBusProperty("OnBattery", signature: "b", get: { .boolean(true) })
                        ])
                ]), at: "/org/freedesktop/UPower")
            #expect(try await upower.requestName("org.freedesktop.UPower") == .primaryOwner)
            let profiles = try await bus.connect()
            try await profiles.export(
                DBusObject(interfaces: [
                    DBusInterface(
                        "net.hadess.PowerProfiles",
                        properties: [
                            DBusProperty("ActiveProfile", signature: "s", get: { .string("power-saver") })
                        ])
                ]), at: "/net/hadess/PowerProfiles")
            #expect(try await profiles.requestName("net.hadess.PowerProfiles") == .primaryOwner)

            let power = check(
                DoctorCheck.Name.powerSource, in: await Doctor(options: fixtures.options(bus: bus.address)).run())
            #expect(power.status == .ok)
            // UPower answered, so sysfs is not consulted.
            #expect(
                power.detail
                    == "UPower: on battery (polling is stretched); power profile power-saver (polling is stretched)")
        }
    }

    @Test func theHCICheckFailsOnThisMachineBecauseItsKernelHasNoBluetooth() async throws {
        let fixtures = try Fixtures()
        defer { fixtures.remove() }
        var options = fixtures.options()
        options.bluetoothClassDirectory = "/sys/class/bluetooth"
        let controllers = check(DoctorCheck.Name.controllers, in: await Doctor(options: options).run())
        guard !FileManager.default.fileExists(atPath: "/sys/class/bluetooth") else {
            // A kernel with Bluetooth: whatever it has, the check says so.
            #expect(!controllers.detail.isEmpty)
            return
        }
        #expect(controllers.status == .failed)
        #expect(controllers.detail.contains("no Bluetooth"), "\(controllers)")
        #expect(controllers.fix?.contains("modprobe bluetooth") == true)
    }

    @Test func refusedBluetoothSocketsWithAKernelThatHasBluetoothBlameTheSandbox() async throws {
        // Only meaningful where socket(AF_BLUETOOTH) fails with EAFNOSUPPORT, as on this machine.
        guard !FileManager.default.fileExists(atPath: "/sys/class/bluetooth") else { return }
        let fixtures = try Fixtures()
        defer { fixtures.remove() }
        try fixtures.file("bluetooth/hci0/type", "Primary")
        var options = fixtures.options()
        options.bluetoothClassDirectory = fixtures.directory + "/bluetooth"
        let controllers = check(DoctorCheck.Name.controllers, in: await Doctor(options: options).run())
        #expect(controllers.status == .failed)
        #expect(controllers.detail.contains("a sandbox denies the address family"), "\(controllers)")
    }

    // MARK: Configuration

    @Test func aBrokenConfigurationFailsWithItsFileLineAndColumn() async throws {
        let fixtures = try Fixtures()
        defer { fixtures.remove() }
        var options = fixtures.options()
        let error = ConfigurationError(
            .badAddress, at: SourceLocation(file: "keepalive.yaml", line: 12, column: 14), field: "devices[1].address",
            "\"C0:FF:EE\" is not a Bluetooth address")
        options.configuration = .failure(error)
        let configuration = check(DoctorCheck.Name.configuration, in: await Doctor(options: options).run())
        #expect(configuration.status == .failed)
        #expect(configuration.detail.hasPrefix("keepalive.yaml:12:14: devices[1].address:"))
        #expect(configuration.fix == "correct keepalive.yaml at line 12, column 14")
    }

    @Test func aGoodConfigurationIsSummarisedAndNoneIsSkipped() async throws {
        let fixtures = try Fixtures()
        defer { fixtures.remove() }
        let none = check(DoctorCheck.Name.configuration, in: await Doctor(options: fixtures.options()).run())
        #expect(none.status == .skipped)
        #expect(none.detail == "no --config given")

        var configuration = DaemonConfiguration()
        configuration.path = "/etc/keepalive/keepalive.yaml"
        configuration.devices = [
            .init(name: "a", address: "C0:FF:EE:00:00:01"),
            .init(name: "b", address: "C0:FF:EE:00:00:02", adapter: "hci1"),
        ]
        var options = fixtures.options()
        options.configuration = .success(configuration)
        let summary = check(DoctorCheck.Name.configuration, in: await Doctor(options: options).run())
        #expect(summary.status == .ok)
        #expect(summary.detail == "/etc/keepalive/keepalive.yaml: 2 devices on hci0, hci1, interval 30s")
    }

    @Test func theConfigurationsAdaptersAreTheOnesThatMustExist() async throws {
        try await withSimulator { bus, _, fixtures in
            var configuration = DaemonConfiguration()
            configuration.devices = [.init(name: "b", address: "C0:FF:EE:00:00:02", adapter: "hci1")]
            var options = fixtures.options(bus: bus.address)
            options.configuration = .success(configuration)
            let adapters = check(DoctorCheck.Name.adapters, in: await Doctor(options: options).run())
            #expect(adapters.status == .failed)
            #expect(adapters.detail.hasPrefix("hci1 not found"))
        }
    }

    // MARK: The verdict

    @Test func passedIsFalseWhenAnyCheckFailedAndTrueForWarningsAndSkips() {
        let fine = [
            DoctorCheck("a", .ok, "fine"), DoctorCheck("b", .warning, "hmm"), DoctorCheck("c", .skipped, "n/a"),
        ]
        #expect(Doctor.passed(fine))
        #expect(!Doctor.passed(fine + [DoctorCheck("d", .failed, "broken", fix: "mend it")]))
        #expect(DoctorCheck("d", .failed, "broken", fix: "mend it").description == "[failed] d: broken — fix: mend it")
    }

    @Test func everyFailedCheckCarriesAFix() async throws {
        let fixtures = try Fixtures()
        defer { fixtures.remove() }
        var options = fixtures.options(bus: "unix:path=/nonexistent/socket")
        try fixtures.file("rfkill/rfkill0/type", "bluetooth")
        try fixtures.file("rfkill/rfkill0/soft", "1")
        options.configuration = .failure(
            ConfigurationError(.syntax, at: SourceLocation(file: "k.yaml", line: 1, column: 1), field: "", "not YAML"))
        let checks = await Doctor(options: options).run()
        let failed = checks.filter { $0.status == .failed }
        #expect(failed.count >= 3)
        for check in failed { #expect(check.fix?.isEmpty == false, "\(check)") }
    }

    /// The real host, as `keepalive doctor` sees it with no options: eight checks, in order, within the bounds.
    @Test func theHostIsExaminedWithinTheBounds() async {
        let clock = ContinuousClock()
        let start = clock.now
        let checks = await Doctor().run()
        // Only a give-up: that no check falls back to libdbus's 25-s default is what the tests of the missing and
        // the silent bus prove, by the checks' words. The wall clock cannot: this run took 16.7 s on two loaded
        // cores and over 24 s on CI's, while the suite's start held the thread pool.
        #expect(clock.now - start < .seconds(60 * sanitizerSlowdown * sanitizerSlowdown))
        #expect(checks.map(\.name) == Self.names)
        for check in checks where check.status == .failed { #expect(check.fix != nil, "\(check)") }
        if ProcessInfo.processInfo.environment["DOCTOR_PRINT"] != nil {
            for check in checks { print(check) }
        }
    }
}

// MARK: Support

/// The check called `name` (a test that asks for one that is not there fails).
func check(_ name: String, in checks: [DoctorCheck]) -> DoctorCheck {
    guard let found = checks.first(where: { $0.name == name }) else {
        Issue.record("no check named \(name) in \(checks.map(\.name))")
        return DoctorCheck(name, .skipped, "missing")
    }
    return found
}

/// A temporary directory holding sysfs look-alikes and scripts, and options that point the doctor at it (so no
/// test depends on this machine's /sys).
struct Fixtures: Sendable {
    let directory: String

    init() throws {
        var template = Array("/tmp/keepalive-doctor-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        directory = String(cString: made)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Options for a private bus (or none reachable) and this directory's rfkill and power_supply; bluetoothd is
    /// a script answering 5.66.
    func options(bus address: String = "unix:path=/nonexistent/socket") -> Doctor.Options {
        let bluetoothd = (try? script("bluetoothd", "echo 5.66")) ?? "/nonexistent"
        var options = Doctor.Options(
            bus: .address(address), rfkillDirectory: directory + "/rfkill",
            powerSupplyDirectory: directory + "/power_supply",
            bluetoothClassDirectory: directory + "/no-bluetooth-class", bluetoothdPaths: [bluetoothd])
        // The doctor's give-up for each bus call (3 s) is raced on the shared thread pool, which the whole suite
        // holds for its first half minute on two cores: the call's own steps then queue behind everything else and
        // a 3-s timer can end before a fresh private bus has answered (an ASan run, then a plain CI run, failed
        // the bus checks here). The tests of the timeout set their own.
        options.timeout = .seconds(60 * sanitizerSlowdown)
        // The same for `bluetoothd --version` (2 s): a one-line script took longer while the whole suite loaded two
        // cores (a stock-executors run). The test of the bound sets its own.
        options.versionTimeout = .seconds(30)
        return options
    }

    func file(_ relativePath: String, _ contents: String) throws {
        let path = directory + "/" + relativePath
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try (contents + "\n").write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// An executable `/bin/sh` script; returns its path.
    ///
    /// Written through a close-on-exec descriptor: a process spawned by another test while the file is open for
    /// writing would otherwise keep it open, and running the script would fail with ETXTBSY ("Text file busy").
    func script(_ name: String, _ body: String) throws -> String {
        try FileManager.default.createDirectory(atPath: directory + "/bin", withIntermediateDirectories: true)
        let path = directory + "/bin/" + name
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o700)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        let bytes = Array(("#!/bin/sh\n" + body + "\n").utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == bytes.count else { throw POSIXError(.EIO) }
        return path
    }
}

/// A private bus with the simulator (one adapter, hci0) and fixtures, torn down afterwards.
func withSimulator(
    adapters: [SimulatedAdapter] = ["hci0"],
    _ body: @Sendable (PrivateBus, BlueZSimulator, Fixtures) async throws -> Void
) async throws {
    let fixtures = try Fixtures()
    defer { fixtures.remove() }
    try await PrivateBus.with { bus in
        let simulator = try await BlueZSimulator.start(
            on: .address(bus.address), configuration: .init(adapters: adapters, timeScale: 0.01, controlName: nil))
        let result: Result<Void, any Error>
        do { result = .success(try await body(bus, simulator, fixtures)) } catch { result = .failure(error) }
        await simulator.stop()
        try result.get()
    }
}

/// A Unix stream socket listening at `path` that never accepts. Close-on-exec: a dbus-daemon another test spawns
/// meanwhile must not inherit it, or closing it here would not close the listener.
func listeningSocket(at path: String) throws -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: bytes.prefix(raw.count - 1))
    }
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard bound == 0, listen(fd, 8) == 0 else {
        let code = errno
        close(fd)
        throw POSIXError(.init(rawValue: code) ?? .EIO)
    }
    return fd
}
