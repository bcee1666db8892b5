import DBusTesting
import Foundation
import Locking
import MQTT

#if canImport(Glibc)
import Glibc
#endif

/// A real mosquitto broker on 127.0.0.1, started by a test in a temporary directory and killed by PID.
final class Broker: Sendable {
    let port: Int
    let directory: String
    private let process: Watched
    private let configuration: String

    /// Starts `mosquitto -c <dir>/mosquitto.conf` on `port` (a free one by default) with `extra` configuration
    /// lines for its listener, and waits until it accepts TCP connections.
    static func start(port: Int? = nil, directory: String? = nil, listener extra: String = "allow_anonymous true")
        async throws -> Broker
    {
        let directory = try directory ?? makeTemporaryDirectory()
        // A free port can be taken between finding it and mosquitto binding it (another test's client may get
        // it as its ephemeral port): try a few.
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await start(port: try port ?? freePort(), directory: directory, listener: extra)
            } catch let error as BrokerFailed where port == nil && attempt < 5 && error.output.contains("Address already in use") {
                continue
            }
        }
    }

    private static func start(port: Int, directory: String, listener extra: String) async throws -> Broker {
        let configuration = """
            per_listener_settings false
            persistence false
            user root
            log_dest file \(directory)/broker.log
            log_type all
            listener \(port) 127.0.0.1
            \(extra)

            """
        return try await Broker(port: port, directory: directory, configuration: configuration)
    }

    private init(port: Int, directory: String, configuration: String) async throws {
        self.port = port
        self.directory = directory
        self.configuration = configuration
        try configuration.write(toFile: directory + "/mosquitto.conf", atomically: true, encoding: .utf8)
        process = try Watched(["mosquitto", "-c", directory + "/mosquitto.conf"])
        let process = self.process
        try await waitUntil("mosquitto listens on \(port)", timeout: .seconds(10)) {
            if process.exitStatus != nil { throw BrokerFailed(output: process.output + Broker.log(directory)) }
            return tcpConnects(port: port)
        }
    }

    var pid: pid_t { process.pid }

    /// Starts a new broker with the same configuration and port (after ``kill()``).
    func restart() async throws -> Broker {
        try await Broker(port: port, directory: directory, configuration: configuration)
    }

    func kill() {
        process.kill(SIGKILL)
        process.waitForExit()
    }

    func signal(_ number: Int32) {
        process.kill(number)
    }

    var log: String { Broker.log(directory) }

    private static func log(_ directory: String) -> String {
        (try? String(contentsOfFile: directory + "/broker.log", encoding: .utf8)) ?? ""
    }

    /// Kills it and removes its directory.
    func remove() {
        kill()
        _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", directory])
    }
}

struct SystemCallFailed: Error {
    var errno: Int32
}

struct BrokerFailed: Error, CustomStringConvertible {
    var output: String
    var description: String { "mosquitto did not start: \(output)" }
}

/// A child process whose output is collected (by a thread per pipe) and whose exit is reaped by a thread.
final class Watched: Sendable {
    let pid: pid_t
    private let state = Locked((output: "", exited: Int32?.none))

    init(_ arguments: [String]) throws {
        let (pid, stdout, stderr) = try Subprocess.spawn(arguments)
        self.pid = pid
        let state = self.state
        for descriptor in [stdout, stderr] {
            Thread {
                var buffer = [UInt8](repeating: 0, count: 65_536)
                while true {
                    let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                    if count < 0, errno == EINTR { continue }
                    if count <= 0 { break }
                    let text = String(decoding: buffer[0..<count], as: UTF8.self)
                    state.withLock { $0.output += text }
                }
                close(descriptor)
            }.start()
        }
        Thread {
            let status = Subprocess.waitForExit(pid)
            state.withLock { $0.exited = status }
        }.start()
    }

    var output: String { state.withLock { $0.output } }
    var exitStatus: Int32? { state.withLock { $0.exited } }

    func kill(_ number: Int32) {
        if exitStatus == nil { Glibc.kill(pid, number) }
    }

    /// Blocks until the reaper thread has seen the exit (after a SIGKILL: at once).
    func waitForExit() {
        while exitStatus == nil { usleep(1_000) }
    }

    func waitForExit(within limit: Duration) async throws -> Int32 {
        try await waitUntil("process \(pid) exits", timeout: limit) { self.exitStatus != nil }
        return exitStatus ?? -1
    }
}

/// A port nobody listens on: bind port 0 on 127.0.0.1 and read back what the kernel chose.
func freePort() throws -> Int {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw SystemCallFailed(errno: errno) }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
    }
    guard bound == 0 else { throw SystemCallFailed(errno: errno) }
    let named = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
    }
    guard named == 0 else { throw SystemCallFailed(errno: errno) }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Whether something accepts a TCP connection on 127.0.0.1:`port`.
func tcpConnects(port: Int) -> Bool {
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

func makeTemporaryDirectory() throws -> String {
    var template = Array("/tmp/mqtt-test-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw SystemCallFailed(errno: errno) }
    return String(cString: made)
}

/// Runs a command to its end, failing the test with its output when it fails.
@discardableResult
func run(_ arguments: [String]) async throws -> String {
    let output = try await Subprocess.run(arguments)
    guard output.status == 0 else {
        throw CommandFailed(description: "\(arguments.joined(separator: " ")) → \(output.status): \(output.standardError)")
    }
    return output.standardOutput
}

struct CommandFailed: Error, CustomStringConvertible {
    var description: String
}

/// A client configuration for `broker`, with a unique client id and a fast reconnection for tests.
func configuration(
    _ broker: Broker, clientID: String = "test-\(UInt32.random(in: 0...UInt32.max))", keepAlive: Duration = .seconds(60),
    will: MQTTConfiguration.Will? = nil, protocolVersion: MQTTProtocolVersion = .v5
) -> MQTTConfiguration {
    MQTTConfiguration(
        host: "127.0.0.1", port: broker.port, clientID: clientID, keepAlive: keepAlive,
        protocolVersion: protocolVersion, will: will,
        reconnect: MQTTReconnectPolicy(initialDelay: .milliseconds(50), maximumDelay: .milliseconds(200)))
}

/// Collects a client's messages as they come, for conditions to wait on.
final class Inbox: Sendable {
    private let received = Locked([MQTTMessage]())
    private let task: Task<Void, Never>

    init(_ client: MQTTClient) {
        let received = self.received
        task = Task {
            for await message in client.messages { received.withLock { $0.append(message) } }
        }
    }

    var messages: [MQTTMessage] { received.withLock { $0 } }

    func first(on topic: String, within limit: Duration = .seconds(10)) async throws -> MQTTMessage {
        try await waitUntil("a message on \(topic)", timeout: limit) { self.messages.contains { $0.topic == topic } }
        return messages.first { $0.topic == topic }!
    }

    deinit { task.cancel() }
}

/// Collects a client's connection events.
final class EventLog: Sendable {
    private let received = Locked([MQTTConnectionEvent]())
    private let task: Task<Void, Never>

    init(_ client: MQTTClient) {
        let received = self.received
        task = Task {
            for await event in client.events { received.withLock { $0.append(event) } }
        }
    }

    var events: [MQTTConnectionEvent] { received.withLock { $0 } }

    var connections: Int { events.filter { if case .connected = $0 { true } else { false } }.count }
    var disconnections: Int { events.filter { if case .disconnected = $0 { true } else { false } }.count }

    deinit { task.cancel() }
}

extension String {
    var bytes: [UInt8] { Array(utf8) }
}
