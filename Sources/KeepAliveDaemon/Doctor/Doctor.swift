import BlueZ
public import DBus

#if canImport(Glibc)
    import Glibc
#endif

/// One finding of `keepalive doctor`: what was looked at, how it went, and — when it went wrong — one line an
/// operator can act on.
///
/// ```swift
/// DoctorCheck(DoctorCheck.Name.adapters, .failed, "hci0 00:1A:7D:DA:71:00 off", fix: "`bluetoothctl power on`")
/// ```
public struct DoctorCheck: Sendable, Hashable, CustomStringConvertible {
    public enum Status: String, Sendable, Hashable, CaseIterable {
        case ok, warning, failed, skipped
    }

    /// The names `Doctor.run()` gives its checks, in the order it runs them.
    public enum Name {
        public static let systemBus = "system bus"
        public static let bluez = "org.bluez"
        public static let permission = "permission"
        public static let adapters = "adapters"
        public static let advertisements = "advertisements"
        public static let rfkill = "rfkill"
        public static let controllers = "HCI controllers"
        public static let powerSource = "power source"
        public static let configuration = "configuration"
    }

    public var name: String
    public var status: Status
    /// What was found, in one or two sentences.
    public var detail: String
    /// What to do about it; set on every failed check.
    public var fix: String?

    public init(_ name: String, _ status: Status, _ detail: String, fix: String? = nil) {
        self.name = name
        self.status = status
        self.detail = detail
        self.fix = fix
    }

    public var description: String {
        let line = "[\(status.rawValue)] \(name): \(detail)"
        return fix.map { line + " — fix: " + $0 } ?? line
    }
}

/// The diagnostics behind `keepalive doctor`: system bus, BlueZ, permissions, adapters, rfkill, the kernel's
/// HCI controllers, the power source and the configuration file, each bounded in time.
///
/// ```swift
/// let checks = await Doctor(options: .init(configuration: Result { try ConfigurationLoader.load(path: path) }
///                                                          .mapError { $0 as! ConfigurationError })).run()
/// for check in checks { print(check) }
/// exit(Doctor.passed(checks) ? 0 : 1)
/// ```
///
/// `run()` never throws: every failure, time-out included, becomes a check. It needs no privileges beyond what
/// the daemon itself has (a non-root user allowed by the D-Bus policy), and opens at most one bus connection,
/// closed before it returns.
public struct Doctor: Sendable {
    /// What to examine and where.
    public struct Options: Sendable {
        public var bus: DBusConnection.Bus
        /// How the bus is named in details, e.g. "the system bus (unix:path=/var/run/dbus/system_bus_socket)".
        public var busDescription: String
        /// The configuration file as loaded; nil when none was given.
        public var configuration: Result<DaemonConfiguration, ConfigurationError>?
        /// The adapter that must exist and be powered; nil: the configuration's adapters, or any adapter.
        public var adapter: String?
        public var rfkillDirectory: String
        public var powerSupplyDirectory: String
        /// Present when the kernel has Bluetooth; tells a kernel without it from a sandbox refusing AF_BLUETOOTH.
        public var bluetoothClassDirectory: String
        /// Where bluetoothd may be installed; the first that exists is asked `--version`.
        public var bluetoothdPaths: [String]
        /// The bound of each step that waits for something else: connecting to the bus, each D-Bus call.
        public var timeout: Duration
        /// The bound on `bluetoothd --version`.
        public var versionTimeout: Duration

        public init(
            bus: DBusConnection.Bus = .system,
            busDescription: String? = nil,
            configuration: Result<DaemonConfiguration, ConfigurationError>? = nil,
            adapter: String? = nil,
            rfkillDirectory: String = "/sys/class/rfkill",
            powerSupplyDirectory: String = "/sys/class/power_supply",
            bluetoothClassDirectory: String = "/sys/class/bluetooth",
            bluetoothdPaths: [String] = [
                "/usr/libexec/bluetooth/bluetoothd", "/usr/lib/bluetooth/bluetoothd", "/usr/sbin/bluetoothd",
            ],
            timeout: Duration = .seconds(3),
            versionTimeout: Duration = .seconds(2)
        ) {
            self.bus = bus
            self.busDescription = busDescription ?? bus.resolvedDescription
            self.configuration = configuration
            self.adapter = adapter
            self.rfkillDirectory = rfkillDirectory
            self.powerSupplyDirectory = powerSupplyDirectory
            self.bluetoothClassDirectory = bluetoothClassDirectory
            self.bluetoothdPaths = bluetoothdPaths
            self.timeout = timeout
            self.versionTimeout = versionTimeout
        }
    }

    typealias Name = DoctorCheck.Name

    /// BlueZ older than this gets a warning (see `checkBlueZ`).
    static let minimumBlueZ = BlueZVersion(major: 5, minor: 55)

    public var options: Options

    public init(options: Options = Options()) {
        self.options = options
    }

    /// Whether nothing failed (warnings and skipped checks pass).
    public static func passed(_ checks: [DoctorCheck]) -> Bool {
        !checks.contains { $0.status == .failed }
    }

    /// Runs every check, in order; D-Bus checks that cannot run say what they need.
    public func run() async -> [DoctorCheck] {
        var checks: [DoctorCheck] = []
        let connection = await connect()
        checks.append(connection.check)
        if let bus = connection.bus {
            let bluez = await checkBlueZ(bus)
            checks.append(bluez.check)
            if bluez.present {
                let permission = await checkPermission(bus)
                checks.append(permission.check)
                if let objects = permission.objects {
                    checks.append(checkAdapters(objects))
                    checks.append(checkAdvertisementScanning(objects))
                } else {
                    checks.append(DoctorCheck(Name.adapters, .skipped, "needs GetManagedObjects on org.bluez"))
                    checks.append(DoctorCheck(Name.advertisements, .skipped, "needs GetManagedObjects on org.bluez"))
                }
            } else {
                let detail = "needs org.bluez on the bus"
                checks.append(DoctorCheck(Name.permission, .skipped, detail))
                checks.append(DoctorCheck(Name.adapters, .skipped, detail))
                checks.append(DoctorCheck(Name.advertisements, .skipped, detail))
            }
        } else {
            for name in [Name.bluez, Name.permission, Name.adapters, Name.advertisements] {
                checks.append(DoctorCheck(name, .skipped, "needs the system bus"))
            }
        }
        checks.append(checkRfkill())
        checks.append(checkControllers())
        checks.append(await checkPowerSource(connection.bus))
        checks.append(checkConfiguration())
        await connection.bus?.close()
        return checks
    }

    // MARK: 1. The bus

    func connect() async -> (check: DoctorCheck, bus: DBusConnection?) {
        let location = options.busDescription
        let fix = "start the bus with `systemctl start dbus`, or point DBUS_SYSTEM_BUS_ADDRESS at the bus to use"
        let bus = options.bus
        // libdbus connects and authenticates synchronously and cannot be interrupted: against a socket that
        // accepts but never answers it waits in poll() with no timeout at all (seen with libdbus 1.14). So the
        // connection is raced against the timeout; one that opens after we gave up is closed.
        let outcome = await Deadline.first(
            within: options.timeout, { try await DBusConnection(bus: bus) }, abandoned: { await $0.close() })
        switch outcome {
        case .none:
            return (
                DoctorCheck(
                    Name.systemBus, .failed,
                    "no answer from \(location) within \(options.timeout.compact): the socket accepts "
                        + "connections but the bus does not authenticate",
                    fix: "restart the bus: `systemctl restart dbus`"), nil
            )
        case .failure(let error)?:
            return (
                DoctorCheck(
                    Name.systemBus, .failed, "cannot connect to \(location): \(Self.connectFailure(error))", fix: fix),
                nil
            )
        case .success(let connection)?:
            return (
                DoctorCheck(Name.systemBus, .ok, "connected to \(location) as \(connection.uniqueName)"), connection
            )
        }
    }

    // MARK: 2. org.bluez and BlueZ's version

    func checkBlueZ(_ bus: DBusConnection) async -> (check: DoctorCheck, present: Bool) {
        let present: Bool
        do {
            present = try await hasOwner(BlueZ.service, on: bus)
        } catch {
            return (
                DoctorCheck(
                    Name.bluez, .failed, "asking the bus whether org.bluez is there failed: \(Self.message(error))",
                    fix: "restart the bus: `systemctl restart dbus`"), false
            )
        }
        let version = await bluetoothdVersion()
        guard present else {
            let installed =
                switch version {
                case .found(let path, let version): "bluetoothd \(version) is installed at \(path)"
                case .unknown(let reason): reason
                }
            return (
                DoctorCheck(
                    Name.bluez, .failed, "org.bluez is not on the bus (bluetoothd is not running); \(installed)",
                    fix: "`systemctl start bluetooth` (bluetoothd exits at once when the kernel has no Bluetooth: "
                        + "see \"\(Name.controllers)\")"), false
            )
        }
        switch version {
        case .found(_, let found) where found < Self.minimumBlueZ:
            return (
                DoctorCheck(
                    Name.bluez, .warning,
                    "org.bluez is on the bus; BlueZ \(found) is older than \(Self.minimumBlueZ): its GATT client "
                        + "mishandles Service Changed, the database hash and disconnects (fixed in 5.55)",
                    fix: "upgrade bluez to 5.55 or later (Debian 11, Ubuntu 22.04 and newer ship it)"), true
            )
        case .found(_, let found):
            return (DoctorCheck(Name.bluez, .ok, "org.bluez is on the bus; BlueZ \(found)"), true)
        case .unknown(let reason):
            return (DoctorCheck(Name.bluez, .ok, "org.bluez is on the bus; BlueZ version unknown (\(reason))"), true)
        }
    }

    // MARK: 3. Permission

    func checkPermission(_ bus: DBusConnection) async -> (
        check: DoctorCheck, objects: [ObjectPath: [String: [String: DBusValue]]]?
    ) {
        do {
            let objects = try await bus.getManagedObjects(
                destination: BlueZ.service, path: .root, timeout: options.timeout)
            return (
                DoctorCheck(
                    Name.permission, .ok,
                    "\(Self.currentUser()) may call org.bluez (GetManagedObjects: \(objects.count) objects)"),
                objects
            )
        } catch let error as DBusError where error.name == DBusError.StandardName.accessDenied {
            return (
                DoctorCheck(
                    Name.permission, .failed,
                    "\(Self.currentUser()) may not call org.bluez: \(error.message)",
                    fix: "install udev/io.keepalive.conf in /etc/dbus-1/system.d/ and put the user in group "
                        + "bluetooth (`usermod -aG bluetooth USER`)"), nil
            )
        } catch let error as DBusError where error.code == .timeout {
            return (
                DoctorCheck(
                    Name.permission, .failed,
                    "org.bluez did not answer GetManagedObjects within \(options.timeout.compact): "
                        + "bluetoothd is stuck", fix: "`systemctl restart bluetooth`"), nil
            )
        } catch {
            return (
                DoctorCheck(
                    Name.permission, .failed, "GetManagedObjects on org.bluez failed: \(Self.message(error))",
                    fix: "`systemctl restart bluetooth`, then `journalctl -u bluetooth` if it persists"), nil
            )
        }
    }

    // MARK: 4. Adapters

    func checkAdapters(_ objects: [ObjectPath: [String: [String: DBusValue]]]) -> DoctorCheck {
        let adapters = objects.compactMap { path, interfaces in
            interfaces[BlueZ.adapterInterface].map { AdapterState(path: path, properties: BlueZProperties($0)) }
        }.sorted { $0.name < $1.name }
        guard !adapters.isEmpty else {
            return DoctorCheck(
                Name.adapters, .failed, "no Bluetooth adapter: org.bluez has no org.bluez.Adapter1 object",
                fix: "plug an adapter in; check `rfkill list` and that the kernel sees it (`dmesg | grep -i bluetooth`)"
            )
        }
        let listing = adapters.map(Self.describe).joined(separator: ", ")
        let wanted = wantedAdapters()
        let missing = wanted.filter { name in !adapters.contains { $0.name == name } }
        if !missing.isEmpty {
            return DoctorCheck(
                Name.adapters, .failed,
                "\(missing.joined(separator: ", ")) not found; present: \(listing)",
                fix: "plug \(missing.joined(separator: ", ")) in, or name one of "
                    + "\(adapters.map(\.name).joined(separator: ", ")) (`adapter:` in the configuration, --adapter)")
        }
        let relevant = wanted.isEmpty ? adapters : adapters.filter { wanted.contains($0.name) }
        let off = relevant.filter { !$0.powered }
        guard let first = off.first else {
            return DoctorCheck(Name.adapters, .ok, listing)
        }
        // Without a named adapter one powered adapter is enough; an unpowered spare is only worth a warning.
        let status: DoctorCheck.Status = wanted.isEmpty && off.count < relevant.count ? .warning : .failed
        let fix: String
        if off.contains(where: { $0.powerState == "off-blocked" }) {
            fix = "`rfkill unblock bluetooth` (then `bluetoothctl power on` if the adapter stays off)"
        } else if adapters.count == 1 {
            fix = "`bluetoothctl power on` (AutoEnable=true in /etc/bluetooth/main.conf keeps it on after restarts)"
        } else {
            // bluetoothctl acts on its "default" adapter, a coin toss with two of them: name the object.
            let others = off.dropFirst().map(\.name)
            fix =
                "`busctl set-property org.bluez \(first.path) org.bluez.Adapter1 Powered b true`"
                + (others.isEmpty ? "" : " (likewise for \(others.joined(separator: ", ")))")
        }
        return DoctorCheck(Name.adapters, status, listing, fix: fix)
    }

    /// How advertisements are listened to on each adapter the daemon will use: BlueZ's passive monitoring
    /// (`AdvertisementMonitorManager1`) when bluetoothd offers it, which stock 5.66 does only with
    /// `--experimental`; the daemon listens with active discovery either way, and says so here.
    func checkAdvertisementScanning(_ objects: [ObjectPath: [String: [String: DBusValue]]]) -> DoctorCheck {
        let wanted = wantedAdapters()
        let adapters = objects.filter { path, interfaces in
            interfaces[BlueZ.adapterInterface] != nil
                && (wanted.isEmpty || wanted.contains(String(path.rawValue.split(separator: "/").last ?? "")))
        }.sorted { $0.key.rawValue < $1.key.rawValue }
        guard !adapters.isEmpty else {
            return DoctorCheck(Name.advertisements, .skipped, "no adapter to listen on")
        }
        let parts = adapters.map { path, interfaces in
            let name = path.rawValue.split(separator: "/").last.map(String.init) ?? path.rawValue
            return interfaces["org.bluez.AdvertisementMonitorManager1"] == nil
                ? "\(name): active discovery (bluetoothd offers no passive monitoring without --experimental)"
                : "\(name): active discovery (passive monitoring offered, not used yet)"
        }
        return DoctorCheck(Name.advertisements, .ok, parts.joined(separator: "; "))
    }

    /// The adapters the daemon will use: the option, else the configuration's, else none in particular.
    func wantedAdapters() -> [String] {
        if let adapter = options.adapter { return [adapter] }
        if case .success(let configuration)? = options.configuration { return configuration.adapters }
        return []
    }

    /// What the adapters check reads of an `org.bluez.Adapter1` (BlueZ's `Adapter1` view has no public
    /// initialiser).
    struct AdapterState {
        var path: ObjectPath
        var name: String
        var address: String?
        var powered: Bool
        /// `on`, `off`, `off-enabling`, `on-disabling`, `off-blocked` (rfkill); BlueZ < 5.66 has none.
        var powerState: String?

        init(path: ObjectPath, properties: BlueZProperties) {
            self.path = path
            name = path.rawValue.split(separator: "/").last.map(String.init) ?? path.rawValue
            address = properties["Address"]?.string
            powered = properties["Powered"]?.boolean ?? false
            powerState = properties["PowerState"]?.string
        }
    }

    static func describe(_ adapter: AdapterState) -> String {
        let state: String
        switch adapter.powerState {
        case "off-blocked"?: state = "off, blocked by rfkill"
        case let powerState?: state = powerState
        case nil: state = adapter.powered ? "on" : "off"  // BlueZ < 5.66 has no PowerState
        }
        return "\(adapter.name) \(adapter.address ?? "(no address)") \(state)"
    }

    // MARK: Helpers

    /// `org.freedesktop.DBus.NameHasOwner`.
    func hasOwner(_ name: String, on bus: DBusConnection) async throws -> Bool {
        let reply = try await bus.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            method: "NameHasOwner", arguments: [.string(name)], expecting: "b", timeout: options.timeout)
        return try reply.decode(Bool.self)
    }

    /// A D-Bus error's own text (with its name when it has one); anything else as it describes itself.
    static func message(_ error: any Error) -> String {
        guard let error = error as? DBusError else { return "\(error)" }
        if let name = error.name { return error.message.isEmpty ? name : "\(name): \(error.message)" }
        return error.message
    }

    /// libdbus's reason without the address DBusConnection puts before it ("cannot connect to unix:path=…: "):
    /// the check names the bus already. D-Bus addresses have no spaces, so the address ends at the first ": ".
    static func connectFailure(_ error: any Error) -> String {
        guard let error = error as? DBusError, error.code == .connectFailed else { return message(error) }
        for prefix in ["cannot connect to ", "cannot register on the bus at "] where error.message.hasPrefix(prefix) {
            if let end = error.message.firstRange(of: ": ") { return String(error.message[end.upperBound...]) }
        }
        return error.message
    }

    /// "user alice (uid 1000)".
    static func currentUser() -> String {
        let uid = geteuid()
        guard let entry = getpwuid(uid), let name = entry.pointee.pw_name else { return "uid \(uid)" }
        return "user \(String(cString: name)) (uid \(uid))"
    }
}
