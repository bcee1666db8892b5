#if canImport(Glibc)
    internal import Glibc
#endif

/// `sd_notify(3)` without libsystemd: one datagram per message to `$NOTIFY_SOCKET` (a path, or `@name` for
/// the abstract namespace). Used for READY=1, WATCHDOG=1, STATUS=… and STOPPING=1 under `Type=notify`.
///
/// ```swift
/// if let notifier = SystemdNotifier.fromEnvironment() {
///     notifier.notify("READY=1\nSTATUS=polling 5 devices")
/// }
/// ```
public struct SystemdNotifier: Sendable {
    /// The socket address as systemd gave it.
    public let socketPath: String
    /// Half of `$WATCHDOG_USEC` (systemd's advice), when the watchdog is on for this process.
    public let watchdogInterval: Duration?

    public init(socketPath: String, watchdogInterval: Duration? = nil) {
        self.socketPath = socketPath
        self.watchdogInterval = watchdogInterval
    }

    /// The notifier systemd asked for, or `nil` when not started by systemd with `Type=notify`.
    public static func fromEnvironment(_ environment: [String: String] = ProcessEnvironment.current) -> SystemdNotifier?
    {
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty else { return nil }
        var watchdog: Duration?
        if let text = environment["WATCHDOG_USEC"], let microseconds = Int64(text), microseconds > 0 {
            // WATCHDOG_PID, when set, names the process the watchdog is meant for (not a forked child).
            let forUs = environment["WATCHDOG_PID"].map { $0 == String(getpid()) } ?? true
            if forUs { watchdog = .microseconds(microseconds / 2) }
        }
        return SystemdNotifier(socketPath: path, watchdogInterval: watchdog)
    }

    /// Sends `state` (newline-separated `KEY=value` lines). Returns false when the datagram could not be sent;
    /// a missing notify socket must never stop the daemon, so callers usually just log it.
    @discardableResult
    public func notify(_ state: String) -> Bool {
        // SOCK_CLOEXEC (0o2000000) does not import from Glibc's socket-type enum; a child must not inherit this.
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | 0o2_000_000, 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(socketPath.utf8)
        if pathBytes.first == UInt8(ascii: "@") { pathBytes[0] = 0 }  // abstract namespace
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        // A path needs room for its terminating NUL; an abstract name (leading NUL) has none and may fill it all.
        let abstract = pathBytes.first == 0
        guard !pathBytes.isEmpty, abstract ? pathBytes.count <= capacity : pathBytes.count < capacity else {
            return false
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count + (abstract ? 0 : 1))
        let message = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                message.withUnsafeBytes { buffer in
                    sendto(descriptor, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL), socketAddress, length)
                }
            }
        }
        return sent == message.count
    }
}

/// The process environment as a dictionary (read once per call; the daemon reads it at start-up only).
public enum ProcessEnvironment {
    public static var current: [String: String] {
        var result: [String: String] = [:]
        var pointer = environ
        while let entry = pointer.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                result[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            pointer += 1
        }
        return result
    }
}
