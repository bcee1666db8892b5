import CLinux
import DBus
import Basics
import MQTTBridge

#if canImport(Glibc)
    import Glibc
#endif

// The checks that read the host rather than the bus (rfkill, HCI controllers, power supplies, configuration), the
// bluetoothd version probe, and the bounded waits they rely on.

extension Doctor {
    // MARK: 5. rfkill

    func checkRfkill() -> DoctorCheck {
        let directory = options.rfkillDirectory
        var switches: [String] = []
        var soft = false
        var hard = false
        for entry in SysfsDirectory.entries(directory) {
            let base = directory + "/" + entry
            guard SysfsDirectory.read(base + "/type") == "bluetooth" else { continue }
            let isSoft = SysfsDirectory.read(base + "/soft") == "1"
            let isHard = SysfsDirectory.read(base + "/hard") == "1"
            soft = soft || isSoft
            hard = hard || isHard
            let state = [isHard ? "hard-blocked" : nil, isSoft ? "soft-blocked" : nil].compactMap { $0 }
            let name = SysfsDirectory.read(base + "/name").map { " (\($0))" } ?? ""
            switches.append("\(entry)\(name) " + (state.isEmpty ? "unblocked" : state.joined(separator: ", ")))
        }
        guard !switches.isEmpty else {
            return DoctorCheck(Name.rfkill, .skipped, "no rfkill switches for Bluetooth in \(directory)")
        }
        let detail = switches.joined(separator: ", ")
        if hard {
            return DoctorCheck(
                Name.rfkill, .failed, detail,
                fix: "a hardware switch (or a BIOS setting) blocks Bluetooth: turn it on"
                    + (soft ? ", then `rfkill unblock bluetooth`" : ""))
        }
        if soft { return DoctorCheck(Name.rfkill, .failed, detail, fix: "`rfkill unblock bluetooth`") }
        return DoctorCheck(Name.rfkill, .ok, detail)
    }

    // MARK: 6. HCI controllers

    func checkControllers() -> DoctorCheck {
        let kernelHasBluetooth = SysfsDirectory.exists(options.bluetoothClassDirectory)
        switch HostBluetooth.controllers() {
        case .failure(let error) where error.errno == EAFNOSUPPORT && kernelHasBluetooth:
            // The kernel has Bluetooth (it made the class directory), so something refuses the address family to
            // this process: seccomp, or systemd's RestrictAddressFamilies= (keepalive.service allows AF_UNIX only).
            return DoctorCheck(
                Name.controllers, .failed,
                "socket(AF_BLUETOOTH) is refused (errno \(error.errno)) although the kernel has Bluetooth "
                    + "(\(options.bluetoothClassDirectory) exists): a sandbox denies the address family",
                fix: "run `keepalive doctor` outside the service's sandbox (RestrictAddressFamilies= / seccomp)")
        case .failure(let error) where error.errno == EAFNOSUPPORT:
            return DoctorCheck(
                Name.controllers, .failed,
                "the kernel has no Bluetooth support: socket(AF_BLUETOOTH) fails with errno \(error.errno) "
                    + "(\(String(cString: strerror(error.errno))))",
                fix: "`modprobe bluetooth btusb` (or boot a kernel with CONFIG_BT); in a container or VM the host's "
                    + "kernel must provide Bluetooth")
        case .failure(let error):
            return DoctorCheck(
                Name.controllers, .failed, error.description,
                fix: "check `dmesg | grep -i bluetooth`, and whether a sandbox (seccomp, AppArmor) denies Bluetooth "
                    + "sockets")
        case .success(let controllers) where controllers.isEmpty:
            return DoctorCheck(
                Name.controllers, .failed, "the kernel has Bluetooth but no HCI controller",
                fix: "plug an adapter in; `dmesg | grep -i bluetooth` shows a driver or firmware that failed to load")
        case .success(let controllers):
            let detail = controllers.map { "\($0.name) \($0.address) \($0.isUp ? "UP" : "DOWN")" }
                .joined(separator: ", ")
            guard controllers.contains(where: \.isUp) else {
                return DoctorCheck(
                    Name.controllers, .warning, detail,
                    fix: "bluetoothd brings controllers up when it powers them: `bluetoothctl power on`")
            }
            return DoctorCheck(Name.controllers, .ok, detail)
        }
    }

    // MARK: 7. Power source

    func checkPowerSource(_ bus: DBusConnection?) async -> DoctorCheck {
        var parts: [String] = []
        var known = false
        var onBatteryKnown = false
        if let bus {
            let state = await busPowerState(bus)
            parts += [state.upower, state.profile].compactMap { $0 }
            onBatteryKnown = state.onBatteryKnown
            known = state.onBatteryKnown || state.profile != nil
        }
        if !onBatteryKnown {
            let supplies = powerSupplies()
            if !supplies.isEmpty {
                parts.append("\(options.powerSupplyDirectory): " + supplies.joined(separator: ", "))
                known = true
            }
        }
        if known { return DoctorCheck(Name.powerSource, .ok, parts.joined(separator: "; ")) }
        return DoctorCheck(
            Name.powerSource, .warning,
            (parts + ["no power source: polling stays at the normal interval"]).joined(separator: "; "),
            fix: "nothing to do on mains power; on battery, install upower so that polling slows down")
    }

    /// UPower's OnBattery and the active power profile, as detail fragments; nil fragments when the services are
    /// not on the bus.
    func busPowerState(_ bus: DBusConnection) async -> (upower: String?, onBatteryKnown: Bool, profile: String?) {
        var upower: String?
        var known = false
        if (try? await hasOwner("org.freedesktop.UPower", on: bus)) == true {
            do {
                let value = try await bus.getProperty(
                    "OnBattery", interface: "org.freedesktop.UPower", destination: "org.freedesktop.UPower",
                    path: "/org/freedesktop/UPower", timeout: options.timeout)
                if let onBattery = value.unwrappingVariants.boolean {
                    upower = onBattery ? "UPower: on battery (polling is stretched)" : "UPower: on mains"
                    known = true
                } else {
                    upower = "UPower: OnBattery is not a boolean (\(value))"
                }
            } catch {
                upower = "UPower: OnBattery unreadable (\(Self.message(error)))"
            }
        }
        // power-profiles-daemon took UPower's name in 0.20; older ones are net.hadess.PowerProfiles.
        let daemons: [(name: String, path: ObjectPath)] = [
            ("org.freedesktop.UPower.PowerProfiles", "/org/freedesktop/UPower/PowerProfiles"),
            ("net.hadess.PowerProfiles", "/net/hadess/PowerProfiles"),
        ]
        var profile: String?
        for daemon in daemons where (try? await hasOwner(daemon.name, on: bus)) == true {
            if let value = try? await bus.getProperty(
                "ActiveProfile", interface: daemon.name, destination: daemon.name, path: daemon.path,
                timeout: options.timeout),
                let active = value.unwrappingVariants.string
            {
                profile = "power profile \(active)" + (active == "power-saver" ? " (polling is stretched)" : "")
            }
            break
        }
        return (upower, known, profile)
    }

    /// `AC online`, `BAT0 87% Discharging`, from the system's power supplies (devices' own batteries — a mouse,
    /// a BLE sensor — have scope "Device" and are left out).
    func powerSupplies() -> [String] {
        let directory = options.powerSupplyDirectory
        return SysfsDirectory.entries(directory).compactMap { entry in
            let base = directory + "/" + entry
            guard SysfsDirectory.read(base + "/scope") != "Device" else { return nil }
            switch SysfsDirectory.read(base + "/type") {
            case "Mains"?, "USB"?:
                guard let online = SysfsDirectory.read(base + "/online") else { return nil }
                return "\(entry) " + (online == "1" ? "online" : "offline")
            case "Battery"?:
                let capacity = SysfsDirectory.read(base + "/capacity").map { " \($0)%" } ?? ""
                let status = SysfsDirectory.read(base + "/status").map { " \($0)" } ?? ""
                return "\(entry)\(capacity)\(status)"
            default:
                return nil
            }
        }
    }

    // MARK: 8. Configuration

    func checkConfiguration() -> DoctorCheck {
        switch options.configuration {
        case nil:
            return DoctorCheck(Name.configuration, .skipped, "no --config given")
        case .failure(let error)?:
            return DoctorCheck(
                Name.configuration, .failed, error.description,
                fix: "correct \(error.location.file) at line \(error.location.line), column \(error.location.column)")
        case .success(let configuration)?:
            let source = configuration.path.map { "\($0): " } ?? ""
            let count = configuration.devices.count
            guard count > 0 else {
                return DoctorCheck(
                    Name.configuration, .warning, "\(source)no devices: the daemon has nothing to poll",
                    fix: "add the sensors under `devices:`")
            }
            let devices = "\(count) device\(count == 1 ? "" : "s")"
            let adapters = configuration.adapters.joined(separator: ", ")
            return DoctorCheck(
                Name.configuration, .ok,
                "\(source)\(devices) on \(adapters), interval \(configuration.interval.compact)")
        }
    }

    // MARK: BlueZ's version

    enum InstalledVersion: Sendable {
        case found(path: String, BlueZVersion)
        /// Why not: no bluetoothd, no answer, an answer that is not a version.
        case unknown(String)
    }

    /// bluetoothd has no version on D-Bus: ask the first installed binary `--version`, bounded in time.
    func bluetoothdVersion() async -> InstalledVersion {
        guard let path = options.bluetoothdPaths.first(where: { access($0, X_OK) == 0 }) else {
            return .unknown("no bluetoothd at \(options.bluetoothdPaths.joined(separator: ", "))")
        }
        switch await BoundedProcess.output(of: path, arguments: ["--version"], timeout: options.versionTimeout) {
        case .timedOut:
            return .unknown("`\(path) --version` did not answer within \(options.versionTimeout.compact)")
        case .spawnFailed(let code):
            return .unknown("`\(path) --version` could not be started: \(String(cString: strerror(code)))")
        case .exited(let output):
            guard let version = BlueZVersion(parsing: output) else {
                let text = output.trimmingWhiteSpace().prefix(80)
                return .unknown("`\(path) --version` printed \"\(text)\"")
            }
            return .found(path: path, version)
        }
    }
}

/// A BlueZ release, `5.66`.
struct BlueZVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    var major: Int
    var minor: Int

    /// The first `N.M` in `text`: bluetoothd prints `5.66`, bluetoothctl `bluetoothctl: 5.66`.
    init?(parsing text: String) {
        for word in text.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }) {
            let parts = word.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count >= 2, let major = Int(parts[0]), let minor = Int(parts[1]) else { continue }
            self.init(major: major, minor: minor)
            return
        }
        return nil
    }

    init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    static func < (lhs: BlueZVersion, rhs: BlueZVersion) -> Bool {
        (lhs.major, lhs.minor) < (rhs.major, rhs.minor)
    }

    var description: String { "\(major).\(minor)" }
}

// MARK: Bounded waits

/// Waiting for something that may never come back, without waiting for it past a deadline.
enum Deadline {
    /// Runs `operation` in a task of its own and returns its result, or nil when `timeout` passes first (or the
    /// caller is cancelled). The operation is not awaited past the deadline — `DBusConnection.init` blocks in
    /// libdbus and cannot be interrupted — so a value it produces late goes to `abandoned` (to close it).
    static func first<T: Sendable>(
        within timeout: Duration, _ operation: @escaping @Sendable () async throws -> T,
        abandoned: @escaping @Sendable (T) async -> Void
    ) async -> Result<T, any Error>? {
        let waiter = Locked<CheckedContinuation<Result<T, any Error>?, Never>?>(nil)
        let take: @Sendable () -> CheckedContinuation<Result<T, any Error>?, Never>? = {
            waiter.withLock { slot in
                defer { slot = nil }
                return slot
            }
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                waiter.withLock { $0 = continuation }
                let timer = Task {
                    do { try await Task.sleep(for: timeout) } catch { return }
                    take()?.resume(returning: nil)
                }
                Task {
                    let result: Result<T, any Error>
                    do { result = .success(try await operation()) } catch { result = .failure(error) }
                    timer.cancel()
                    if let continuation = take() {
                        continuation.resume(returning: result)
                    } else if case .success(let value) = result {
                        await abandoned(value)
                    }
                }
            }
        } onCancel: {
            take()?.resume(returning: nil)
        }
    }
}

/// Runs a program to get its output, on a thread of its own (the wait blocks), killing it at a deadline.
enum BoundedProcess {
    enum Outcome: Sendable {
        case exited(String)
        case timedOut
        case spawnFailed(Int32)
    }

    static func output(of path: String, arguments: [String], timeout: Duration) async -> Outcome {
        await withCheckedContinuation { continuation in
            let work: @Sendable () -> Void = { continuation.resume(returning: run(path, arguments, timeout)) }
            // No thread to spare: wait here instead (bounded by `timeout`).
            if !startDetachedThread(work) { work() }
        }
    }

    /// `posix_spawn` with stdout and stderr on one pipe and stdin from /dev/null; reads up to 4 KiB until end of
    /// file or `timeout`, then kills (SIGKILL) and reaps the child if it is still there.
    static func run(_ path: String, _ arguments: [String], _ timeout: Duration) -> Outcome {
        var ends: [Int32] = [-1, -1]
        // Close-on-exec from the start, so that a process another thread spawns does not inherit our pipe and hold
        // its write end open (the read below would then wait for the whole timeout).
        guard clinux_pipe_cloexec(&ends) == 0 else { return .spawnFailed(errno) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
        posix_spawn_file_actions_adddup2(&actions, ends[1], 2)
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, nil, argv, environ)
        close(ends[1])
        defer { close(ends[0]) }
        guard spawned == 0 else { return .spawnFailed(spawned) }

        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1024)
        var timedOut = false
        reading: while output.count < 4096 {
            let remaining = clock.now.duration(to: deadline)
            guard remaining > .zero else {
                timedOut = true
                break
            }
            var descriptor = pollfd(fd: ends[0], events: Int16(POLLIN), revents: 0)
            let (seconds, attoseconds) = remaining.components
            let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1
            let ready = poll(&descriptor, 1, Int32(clamping: milliseconds))
            if ready < 0, errno == EINTR { continue }
            if ready == 0 { continue }
            guard ready > 0 else { break }
            let count = buffer.withUnsafeMutableBytes { read(ends[0], $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break reading }
            output += buffer[0..<count]
        }
        // End of file (or enough output) normally means the program is exiting; one that is not gone yet, or
        // that ran out of time, is killed so that reaping it cannot block.
        var status: Int32 = 0
        if timedOut || waitpid(pid, &status, WNOHANG) == 0 {
            kill(pid, SIGKILL)
            while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        }
        return timedOut ? .timedOut : .exited(String(decoding: output, as: UTF8.self))
    }
}

/// Small reads of sysfs (`/sys/class/rfkill/rfkill0/soft`), which are files of one short line.
enum SysfsDirectory {
    /// The names in `path`, sorted; empty when it is missing or unreadable.
    static func entries(_ path: String) -> [String] {
        guard let directory = opendir(path) else { return [] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// The file's text without surrounding white space; nil when it cannot be read.
    static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard count >= 0 else { return nil }
        return String(String(decoding: buffer[0..<count], as: UTF8.self).trimmingWhiteSpace())
    }

    static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }
}
