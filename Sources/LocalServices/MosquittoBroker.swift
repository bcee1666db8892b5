import Basics

#if canImport(Glibc)
    public import Glibc
#endif

/// A real mosquitto broker on 127.0.0.1, started by a test in a temporary directory and killed by PID.
///
/// Shared by the MQTT client's and the bridge's tests (one copy). It lives here, beside the private dbus-daemon,
/// because this module is the project's test-support library; it knows nothing of MQTT itself (it only starts
/// a program and waits for its port), so the module keeps its dependencies.
///
/// ```swift
/// let broker = try await MosquittoBroker.start()
/// defer { broker.remove() }
/// let client = try MQTTClient(configuration: MQTTConfiguration(host: "127.0.0.1", port: broker.port, clientID: "t"))
/// ```
public final class MosquittoBroker: Sendable {
    public let port: Int
    public let directory: String
    private let process: WatchedProcess
    private let configuration: String
    private let ownProcessGroup: Bool

    /// Starts `mosquitto -c <dir>/mosquitto.conf` on `port` (a free one by default) with `extra` configuration
    /// lines for its listener, and waits until it accepts TCP connections. `persistent` keeps sessions, their
    /// subscriptions and queued messages, and retained messages in `<dir>/mosquitto.db` across ``stop()`` and
    /// ``restart()`` (not across ``kill()``, which leaves no time to save). `ownProcessGroup` keeps it out of a
    /// terminal's Ctrl-C (``Subprocess/spawn(_:ownProcessGroup:)``): for a program that still publishes to it while
    /// it shuts down, and stops it afterwards.
    public static func start(
        port: Int? = nil, directory: String? = nil, persistent: Bool = false,
        listener extra: String = "allow_anonymous true", ownProcessGroup: Bool = false
    ) async throws -> MosquittoBroker {
        let directory = try directory ?? makeTemporaryDirectory()
        // A free port can be taken between finding it and mosquitto binding it (another test's client may get
        // it as its ephemeral port): try a few.
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await start(
                    port: try port ?? freeLoopbackPort(), directory: directory, persistent: persistent, listener: extra,
                    ownProcessGroup: ownProcessGroup)
            } catch let error as MosquittoBrokerFailed
                where port == nil && attempt < 5 && error.output.contains("Address already in use")
            {
                continue
            }
        }
    }

    private static func start(
        port: Int, directory: String, persistent: Bool, listener extra: String, ownProcessGroup: Bool
    ) async throws -> MosquittoBroker {
        let persistence = persistent ? "persistence true\npersistence_location \(directory)/" : "persistence false"
        let configuration = """
            per_listener_settings false
            \(persistence)
            user root
            log_dest file \(directory)/broker.log
            log_type all
            listener \(port) 127.0.0.1
            \(extra)

            """
        return try await MosquittoBroker(
            port: port, directory: directory, configuration: configuration, ownProcessGroup: ownProcessGroup)
    }

    private init(port: Int, directory: String, configuration: String, ownProcessGroup: Bool) async throws {
        self.port = port
        self.directory = directory
        self.configuration = configuration
        self.ownProcessGroup = ownProcessGroup
        try TextFile.write(configuration, to: directory + "/mosquitto.conf")
        process = try WatchedProcess(
            ["mosquitto", "-c", directory + "/mosquitto.conf"], ownProcessGroup: ownProcessGroup)
        let process = self.process
        try await waitUntil("mosquitto listens on \(port)", timeout: .seconds(10)) {
            if process.exitStatus != nil {
                throw MosquittoBrokerFailed(output: process.output + MosquittoBroker.log(directory))
            }
            return tcpConnects(port: port)
        }
    }

    /// The `listener` lines of a broker that lets in only `users` (name → password), from a password file made with
    /// `mosquitto_passwd` at `passwordFile`; anonymous clients are refused. ``setPassword(_:for:in:)`` changes one
    /// while the broker runs.
    ///
    /// ```swift
    /// let passwords = directory + "/passwords"
    /// let broker = try await MosquittoBroker.start(
    ///     listener: try await MosquittoBroker.passwordListener(users: ["gateway": "secret"], passwordFile: passwords))
    /// ```
    public static func passwordListener(users: [String: String], passwordFile: String) async throws -> String {
        var create = true
        for (user, password) in users.sorted(by: { $0.key < $1.key }) {
            try await setPassword(password, for: user, in: passwordFile, creating: create)
            create = false
        }
        return "allow_anonymous false\npassword_file \(passwordFile)"
    }

    /// Sets `user`'s password in `passwordFile` (the broker's, from ``passwordListener(users:passwordFile:)``) and
    /// has the broker reload it (SIGHUP): clients connecting from then on are checked against the new one.
    public func setPassword(_ password: String, for user: String, in passwordFile: String) async throws {
        try await Self.setPassword(password, for: user, in: passwordFile, creating: false)
        signal(SIGHUP)
    }

    private static func setPassword(_ password: String, for user: String, in file: String, creating: Bool)
        async throws
    {
        let made = try await Subprocess.run(
            ["mosquitto_passwd", "-b"] + (creating ? ["-c"] : []) + [file, user, password])
        guard made.status == 0 else {
            throw MosquittoBrokerFailed(output: "mosquitto_passwd: \(made.standardError)")
        }
    }

    public var pid: pid_t { process.pid }

    /// Starts a new broker with the same configuration and port (after ``kill()``).
    public func restart() async throws -> MosquittoBroker {
        try await MosquittoBroker(
            port: port, directory: directory, configuration: configuration, ownProcessGroup: ownProcessGroup)
    }

    /// SIGKILL, and waits until the process is reaped.
    public func kill() {
        process.kill(SIGKILL)
        process.waitForExit()
    }

    /// SIGTERM, and waits until it has exited (a persistent broker saves its database first).
    public func stop() async throws {
        process.kill(SIGTERM)
        _ = try await process.waitForExit(within: .seconds(10))
    }

    public func signal(_ number: Int32) {
        process.kill(number)
    }

    /// The broker's log so far (`log_type all`: every packet it received and sent).
    public var log: String { MosquittoBroker.log(directory) }

    private static func log(_ directory: String) -> String {
        TextFile.read(directory + "/broker.log") ?? ""
    }

    /// Kills it and removes its directory.
    public func remove() {
        kill()
        _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", directory])
    }
}

/// A system call failed in a test helper.
public struct SystemCallFailed: Error {
    public var errno: Int32
    public init(errno: Int32) { self.errno = errno }
}

/// mosquitto exited before it listened; `output` has its output and log.
public struct MosquittoBrokerFailed: Error, CustomStringConvertible {
    public var output: String
    public var description: String { "mosquitto did not start: \(output)" }
}

/// A child process whose output is collected (by a thread per pipe) and whose exit is reaped by a thread.
public final class WatchedProcess: Sendable {
    public let pid: pid_t
    private let state = Locked((output: "", exited: Int32?.none, closedPipes: 0))

    /// Starts `arguments`; `ownProcessGroup` as ``Subprocess/spawn(_:ownProcessGroup:)`` has it.
    public init(_ arguments: [String], ownProcessGroup: Bool = false) throws {
        let (pid, stdout, stderr) = try Subprocess.spawn(arguments, ownProcessGroup: ownProcessGroup)
        self.pid = pid
        let state = self.state
        for descriptor in [stdout, stderr] {
            startThread {
                var buffer = [UInt8](repeating: 0, count: 65_536)
                while true {
                    let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                    if count < 0, errno == EINTR { continue }
                    if count <= 0 { break }
                    let text = String(decoding: buffer[0..<count], as: UTF8.self)
                    state.withLock { $0.output += text }
                }
                close(descriptor)
                state.withLock { $0.closedPipes += 1 }
            }
        }
        startThread {
            let status = Subprocess.waitForExit(pid)
            state.withLock { $0.exited = status }
        }
    }

    /// Standard output and standard error, interleaved as they came.
    public var output: String { state.withLock { $0.output } }
    public var exitStatus: Int32? { state.withLock { $0.exited } }

    public func kill(_ number: Int32) {
        if exitStatus == nil { Glibc.kill(pid, number) }
    }

    /// Blocks until the reaper thread has seen the exit (after a SIGKILL: at once).
    public func waitForExit() {
        while exitStatus == nil { usleep(1_000) }
    }

    /// Waits until the process has exited and its output has been read to the end (the reaper can see the
    /// exit before the pipe threads have read the last lines).
    public func waitForExit(within limit: Duration) async throws -> Int32 {
        try await waitUntil("process \(pid) exits", timeout: limit) {
            self.state.withLock { $0.exited != nil && $0.closedPipes == 2 }
        }
        return exitStatus ?? -1
    }
}

/// A TCP port on 127.0.0.1 that nothing uses, for a server started later (a broker a test brings back).
///
/// Chosen below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`), never from it: a port `bind(0)`
/// returns is an ephemeral one, and until the server binds it any outgoing connection (a client's reconnection, in
/// this or another test) may take it as its source port. Never the same port twice in one process, and only one
/// that binds now.
public func freeLoopbackPort() throws -> Int {
    let ephemeralLow =
        TextFile.read("/proc/sys/net/ipv4/ip_local_port_range")?.split(whereSeparator: \.isWhitespace).first
        .flatMap { Int($0) } ?? 32_768
    let ports = 10_000..<max(ephemeralLow, 10_001)
    for _ in 0..<500 {
        let port = Int.random(in: ports)
        guard handedOutPorts.withLock({ $0.insert(port).inserted }) else { continue }
        if try canBind(port) { return port }
    }
    throw SystemCallFailed(errno: EADDRINUSE)
}

private let handedOutPorts = Locked(Set<Int>())

/// Whether 127.0.0.1:`port` can be bound now (nothing listens on it, no connection holds it).
private func canBind(_ port: Int) throws -> Bool {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw SystemCallFailed(errno: errno) }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    let length = socklen_t(MemoryLayout<sockaddr_in>.size)
    return withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
    } == 0
}

/// Whether something accepts a TCP connection on 127.0.0.1:`port`.
public func tcpConnects(port: Int) -> Bool {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { return false }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    } == 0
}

/// A new empty directory under `parent` (`mkdtemp`), e.g. `/tmp/mqtt-test-Ab12Cd`.
public func makeTemporaryDirectory(prefix: String = "mqtt-test", under parent: String = "/tmp") throws -> String {
    var template = Array("\(parent)/\(prefix)-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw SystemCallFailed(errno: errno) }
    return String(cString: made)
}
