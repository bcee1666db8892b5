import Foundation
import Synchronization
@testable import DBus

#if canImport(Glibc)
import Glibc
#endif

/// A real dbus-daemon on a private bus, started from `Resources/private-bus.conf` in a temporary directory
/// and killed by PID at the end.
///
/// ```swift
/// try await PrivateBus.with { bus in
///     let connection = try await bus.connect()
/// }
/// ```
final class PrivateBus: Sendable {
    let address: String
    let pid: pid_t
    let directory: String
    /// Every connection made through `connect()`, kept alive until the bus stops (a service whose connection
    /// is released leaves the bus).
    private let connections = Mutex<[DBusConnection]>([])

    private init(address: String, pid: pid_t, directory: String) {
        self.address = address
        self.pid = pid
        self.directory = directory
    }

    /// Starts a daemon: `dbus-daemon --config-file=… --print-address=1 --print-pid=1 --fork --nopidfile`.
    static func start() throws -> PrivateBus {
        var template = Array("/tmp/dbus-swift-test-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw PrivateBusError.setup("mkdtemp failed") }
        let directory = String(cString: made)
        guard let url = Bundle.module.url(forResource: "private-bus", withExtension: "conf", subdirectory: "Resources")
        else { throw PrivateBusError.setup("private-bus.conf is missing from the test resources") }
        let config = try String(contentsOf: url, encoding: .utf8)
            .replacingOccurrences(of: "@SOCKET_PATH@", with: directory + "/bus.sock")
        let configPath = directory + "/bus.conf"
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)

        let (launcher, stdout, stderr) = try Subprocess.spawn([
            "dbus-daemon", "--config-file=\(configPath)", "--print-address=1", "--print-pid=1", "--fork",
            "--nopidfile",
        ])
        // The forked daemon prints its address and pid, then the launcher exits.
        let output = Subprocess.readAll(stdout)
        let errors = Subprocess.readAll(stderr)
        var status: Int32 = 0
        while waitpid(launcher, &status, 0) < 0, errno == EINTR {}
        let lines = output.split(separator: "\n").map(String.init)
        guard lines.count >= 2, let pid = pid_t(lines[1].trimmingCharacters(in: .whitespaces)) else {
            throw PrivateBusError.setup("dbus-daemon printed '\(output)', stderr '\(errors)'")
        }
        return PrivateBus(address: lines[0], pid: pid, directory: directory)
    }

    /// Kills the daemon (idempotent) and removes its directory.
    func stop() {
        kill(pid, SIGKILL)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Kills the daemon and waits until the process is gone (it is not our child: poll with signal 0).
    func killDaemon() async throws {
        kill(pid, SIGKILL)
        try await waitUntil("dbus-daemon \(pid) exits") { kill(self.pid, 0) != 0 }
    }

    func connect() async throws -> DBusConnection {
        let connection = try await DBusConnection(bus: .address(address))
        connections.withLock { $0.append(connection) }
        return connection
    }

    /// Runs `body` with a fresh private bus; its connections are closed and the daemon killed afterwards.
    static func with<T: Sendable>(_ body: (PrivateBus) async throws -> T) async throws -> T {
        let bus = try start()
        defer { bus.stop() }
        let result: Result<T, any Error>
        do { result = .success(try await body(bus)) } catch { result = .failure(error) }
        for connection in bus.connections.withLock({ $0 }) { await connection.close() }
        return try result.get()
    }
}

enum PrivateBusError: Error {
    case setup(String)
}

struct TimedOut: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting until \(what)" }
}

/// Polls `condition` every few milliseconds until it holds; throws after `timeout`.
func waitUntil(
    _ what: String, timeout: Duration = .seconds(10), _ condition: @Sendable () async throws -> Bool
) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while try await !condition() {
        guard clock.now < deadline else { throw TimedOut(what: what) }
        try await Task.sleep(for: .milliseconds(5))
    }
}

/// Reads VmRSS from /proc/self/status, in kilobytes.
func residentSetKilobytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
    return 0
}

/// Runs `body`, throwing `TimedOut` if it has not finished after `timeout` (so a broken test fails instead
/// of hanging the run).
func withTimeout<T: Sendable>(
    _ what: String, _ timeout: Duration = .seconds(10), _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw TimedOut(what: what)
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

/// Reads `stream` until `isLast` holds for a signal (included), failing after `timeout`.
func collect(
    _ stream: AsyncThrowingStream<DBusSignal, any Error>, timeout: Duration = .seconds(10),
    until isLast: @escaping @Sendable (DBusSignal) -> Bool
) async throws -> [DBusSignal] {
    try await withTimeout("the last signal arrives", timeout) {
        var received: [DBusSignal] = []
        for try await signal in stream {
            received.append(signal)
            if isLast(signal) { break }
        }
        return received
    }
}
