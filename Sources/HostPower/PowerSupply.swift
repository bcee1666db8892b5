#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One entry of `/sys/class/power_supply` as the kernel describes it (`Documentation/ABI/testing/sysfs-class-power`).
///
/// ```swift
/// let supplies = try PowerSupply.list(root: "/sys/class/power_supply")
/// supplies.first { $0.isMains }?.online        // true: AC plugged in
/// supplies.first { $0.isSystemBattery }?.capacity  // 87
/// ```
public struct PowerSupply: Sendable, Hashable, CustomStringConvertible {
    /// The directory name: `AC`, `BAT0`, `hidpp_battery_0`.
    public var name: String
    /// `type`: `Mains`, `USB`, `Battery`, `UPS`, `Wireless`.
    public var type: String?
    /// `scope`: `System`, `Device` (a peripheral's own battery: a mouse, a BLE sensor), or nil (system).
    public var scope: String?
    /// `online` of a mains or USB supply.
    public var online: Bool?
    /// `capacity` of a battery, in percent.
    public var capacity: Int?
    /// `status` of a battery: `Charging`, `Discharging`, `Not charging`, `Full`, `Unknown`.
    public var status: String?

    public init(
        name: String, type: String?, scope: String? = nil, online: Bool? = nil, capacity: Int? = nil,
        status: String? = nil
    ) {
        self.name = name
        self.type = type
        self.scope = scope
        self.online = online
        self.capacity = capacity
        self.status = status
    }

    /// A supply feeding the system from outside: `Mains`, or `USB` (older kernels spell USB types `USB_C`…).
    public var isMains: Bool {
        guard let type, scope != "Device" else { return false }
        return type == "Mains" || type.hasPrefix("USB")
    }

    /// One of the system's own batteries (not a peripheral's).
    public var isSystemBattery: Bool {
        type == "Battery" && scope != "Device"
    }

    public var isDischarging: Bool {
        status == "Discharging"
    }

    /// `AC online`, `BAT0 87% Discharging`.
    public var description: String {
        if isMains { return "\(name) " + (online == true ? "online" : "offline") }
        let capacity = capacity.map { " \($0)%" } ?? ""
        let status = status.map { " \($0)" } ?? ""
        return "\(name)\(capacity)\(status)"
    }

    /// Why the supplies could not be listed.
    public struct ReadError: Error, Sendable, CustomStringConvertible {
        public var path: String
        public var errorNumber: Int32

        public var description: String {
            "cannot list \(path): \(String(cString: strerror(errorNumber)))"
        }
    }

    /// The mains supplies and system batteries under `root`, by name; other entries (peripherals' batteries,
    /// unknown types) are left out. Throws ``ReadError`` when `root` cannot be listed; an entry whose files
    /// cannot be read is listed with nil fields.
    ///
    /// Each attribute is one small `read(2)`; for a battery the kernel may ask the embedded controller, which
    /// can take milliseconds, so callers read from a task, not on a hot path.
    public static func list(root: String) throws(ReadError) -> [PowerSupply] {
        guard let directory = opendir(root) else { throw ReadError(path: root, errorNumber: errno) }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if !name.hasPrefix(".") { names.append(name) }
        }
        return names.sorted().compactMap { name in
            let base = root + "/" + name + "/"
            let supply = PowerSupply(
                name: name, type: attribute(base + "type"), scope: attribute(base + "scope"),
                online: attribute(base + "online").map { $0 == "1" },
                capacity: attribute(base + "capacity").flatMap { Int($0) },
                status: attribute(base + "status"))
            return supply.isMains || supply.isSystemBattery ? supply : nil
        }
    }

    /// The file's text without surrounding white space; nil when it is missing or unreadable.
    static func attribute(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 128)
        var count: Int
        repeat {
            count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        } while count < 0 && errno == EINTR
        guard count >= 0 else { return nil }
        let text = String(decoding: buffer[0..<count], as: UTF8.self)
        return String(text.drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }
}
