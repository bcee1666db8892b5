public import DBus
import Basics

#if canImport(Glibc)
    public import Glibc
#endif

/// A real `dbus-daemon` on a private bus of system type, in a temporary directory, killed by PID at the end.
///
/// The daemon listens on a Unix socket (EXTERNAL authentication) and, optionally, on a TCP port of 127.0.0.1
/// (ANONYMOUS authentication, like the lab's guest bus). It can be killed and started again on the same
/// socket path and port, so that clients reconnect to the same `address` (bus-loss tests).
///
/// ```swift
/// try await PrivateBus.with { bus in
///     let connection = try await bus.connect()
///     try await bus.restartDaemon()          // every connection sees the bus go away
///     let again = try await bus.connect()    // same address, new daemon
/// }
/// ```
public final class PrivateBus: Sendable {
    /// The Unix socket address, `unix:path=…/bus.sock`, the same across restarts.
    public let address: String
    /// The TCP address `tcp:host=127.0.0.1,port=N,family=ipv4` when started with `tcp: true`; same across restarts.
    public let tcpAddress: String?
    /// The temporary directory holding the socket and the configuration file.
    public let directory: String

    private let configurationPath: String
    private let state = Locked<State>(State(pid: 0, connections: []))

    private struct State {
        var pid: pid_t
        /// Every connection made through `connect()`, kept alive until the bus stops (a service whose
        /// connection is released leaves the bus).
        var connections: [DBusConnection]
    }

    /// The daemon's process id (it changes with `restartDaemon()`).
    public var pid: pid_t { state.withLock { $0.pid } }

    private init(address: String, tcpAddress: String?, directory: String, configurationPath: String, pid: pid_t) {
        self.address = address
        self.tcpAddress = tcpAddress
        self.directory = directory
        self.configurationPath = configurationPath
        state.withLock { $0.pid = pid }
    }

    /// Starts a daemon: `dbus-daemon --config-file=… --print-address=1 --print-pid=1 --fork --nopidfile`.
    ///
    /// - Parameters:
    ///   - tcp: also listen on 127.0.0.1 (a free port) with ANONYMOUS authentication.
    ///   - systemPolicy: D-Bus policy files to include in a bus that denies as the system bus does (its default
    ///     policy read from the installed system.conf; root may still own and call `org.bluez`, for simulators);
    ///     `nil` allows everything. Such a bus's directory can be entered by every user, so a second uid can
    ///     connect.
    public static func start(tcp: Bool = false, systemPolicy: [String]? = nil) throws -> PrivateBus {
        var template = Array("/tmp/dbus-swift-test-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw PrivateBusError.setup("mkdtemp failed") }
        let directory = String(cString: made)
        let socketPath = directory + "/bus.sock"
        let configurationPath = directory + "/bus.conf"
        do {
            if let systemPolicy {
                chmod(directory, 0o755)
                try write(
                    try PrivateBusConfiguration.systemLike(socketPath: socketPath, including: systemPolicy),
                    to: configurationPath)
            } else {
                try write(
                    PrivateBusConfiguration.text(socketPath: socketPath, tcpPort: tcp ? 0 : nil),
                    to: configurationPath)
            }
            let (addresses, pid) = try launch(configurationPath: configurationPath)
            var tcpAddress: String?
            if tcp {
                // Pin the port the kernel chose, so that a restarted daemon listens on it again.
                guard let printed = addresses.first(where: { $0.hasPrefix("tcp:") }),
                    let port = printed.split(separator: ",").first(where: { $0.hasPrefix("port=") })?.dropFirst(5),
                    let number = UInt16(port)
                else {
                    kill(pid, SIGKILL)
                    throw PrivateBusError.setup("dbus-daemon printed no TCP address: \(addresses)")
                }
                try write(PrivateBusConfiguration.text(socketPath: socketPath, tcpPort: number), to: configurationPath)
                tcpAddress = "tcp:host=127.0.0.1,port=\(number),family=ipv4"
            }
            return PrivateBus(
                address: "unix:path=" + socketPath, tcpAddress: tcpAddress, directory: directory,
                configurationPath: configurationPath, pid: pid)
        } catch {
            removeTree(directory)
            throw error
        }
    }

    /// Kills the daemon (idempotent) and removes its directory. Connections are not closed: `with` does that.
    public func stop() {
        kill(pid, SIGKILL)
        removeTree(directory)
    }

    /// Kills the daemon with SIGKILL and waits until the process is gone (it is not our child: poll with
    /// signal 0). Every connection to it sees the bus go away.
    public func killDaemon() async throws {
        let pid = pid
        kill(pid, SIGKILL)
        try await waitUntil("dbus-daemon \(pid) exits") { kill(pid, 0) != 0 }
    }

    /// Starts the daemon again on the same socket path (and TCP port) after `killDaemon()`.
    public func startDaemon() throws {
        unlink(String(address.dropFirst("unix:path=".count)))
        let (_, pid) = try Self.launch(configurationPath: configurationPath)
        state.withLock { $0.pid = pid }
    }

    /// Kills the daemon and starts a new one on the same socket path: "dbus-daemon killed and restarted".
    public func restartDaemon() async throws {
        try await killDaemon()
        try startDaemon()
    }

    /// A new connection to the bus over its Unix socket, closed by `with` at the end.
    public func connect() async throws -> DBusConnection {
        try await connect(address: address)
    }

    /// A new connection over TCP (ANONYMOUS); the bus must have been started with `tcp: true`.
    public func connectOverTCP() async throws -> DBusConnection {
        guard let tcpAddress else { throw PrivateBusError.setup("this bus has no TCP listener") }
        return try await connect(address: tcpAddress)
    }

    private func connect(address: String) async throws -> DBusConnection {
        let connection = try await DBusConnection(bus: .address(address))
        state.withLock { $0.connections.append(connection) }
        return connection
    }

    /// Closes every connection made through `connect()`.
    public func closeConnections() async {
        let connections = state.withLock { state in
            defer { state.connections.removeAll() }
            return state.connections
        }
        for connection in connections { await connection.close() }
    }

    /// Runs `body` with a fresh private bus; its connections are closed and the daemon killed afterwards.
    public static func with<T: Sendable>(tcp: Bool = false, _ body: (PrivateBus) async throws -> T) async throws -> T {
        let bus = try start(tcp: tcp)
        defer { bus.stop() }
        let result: Result<T, any Error>
        do { result = .success(try await body(bus)) } catch { result = .failure(error) }
        await bus.closeConnections()
        return try result.get()
    }

    // MARK: Launching

    private static func write(_ text: String, to path: String) throws {
        try TextFile.write(text, to: path)
    }

    /// Runs the forking daemon; returns the addresses it printed and its pid.
    private static func launch(configurationPath: String) throws -> (addresses: [String], pid: pid_t) {
        let (launcher, stdout, stderr) = try Subprocess.spawn([
            "dbus-daemon", "--config-file=\(configurationPath)", "--print-address=1", "--print-pid=1", "--fork",
            "--nopidfile",
        ])
        // The forked daemon prints its addresses (`;`-separated) and pid, then the launcher exits.
        let output = Subprocess.readAll(stdout)
        let errors = Subprocess.readAll(stderr)
        _ = Subprocess.waitForExit(launcher)
        let lines = output.split(separator: "\n").map(String.init)
        guard lines.count >= 2, let pid = pid_t(lines[1].filter { $0 != " " && $0 != "\t" && $0 != "\r" }) else {
            throw PrivateBusError.setup("dbus-daemon printed '\(output)', stderr '\(errors)'")
        }
        return (lines[0].split(separator: ";").map(String.init), pid)
    }
}

/// A private bus could not be set up.
public enum PrivateBusError: Error, Sendable, CustomStringConvertible {
    case setup(String)

    public var description: String {
        switch self {
        case .setup(let text): "private bus setup failed: \(text)"
        }
    }
}
