import LocalServices
import Basics

#if canImport(Glibc)
    public import Glibc
#endif

/// The built `keepalive` binary, next to this test bundle (`.build/<triple>/debug/`, or the TSan scratch path).
public let keepaliveBinary: String = {
    var buffer = [CChar](repeating: 0, count: 4_096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    let path = count > 0 ? String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
    return directory + "/keepalive"
}()

/// Whether this test process (and so the `keepalive` built beside it) is instrumented by ThreadSanitizer.
public let runningUnderThreadSanitizer = Sanitizers.thread

/// Whether it is instrumented by AddressSanitizer.
public let runningUnderAddressSanitizer = Sanitizers.address

/// How much longer a wall-clock bound must be under a sanitizer: bounds that prove "bounded, not hung" are
/// multiplied by it.
public let sanitizerSlowdown = Sanitizers.slowdown

/// A running `keepalive`: its output collected as it comes (by a thread per pipe), signals, a bounded wait.
public final class CommandProcess: Sendable {
    public let pid: pid_t
    private let output = Locked((standardOutput: "", standardError: "", exited: Int32?.none, closedPipes: 0))

    /// Starts `keepalive` with `arguments`; `environment` is added to this process's (through `env(1)`, which
    /// execs in place: `pid` is keepalive's).
    public init(_ arguments: [String], environment: [String: String] = [:]) throws {
        let prefix =
            environment.isEmpty
            ? [] : ["/usr/bin/env"] + environment.keys.sorted().map { "\($0)=\(environment[$0] ?? "")" }
        let (pid, stdout, stderr) = try Subprocess.spawn(prefix + [keepaliveBinary] + arguments)
        self.pid = pid
        let output = self.output
        Self.drain(
            stdout, { text in output.withLock { $0.standardOutput += text } },
            closed: { output.withLock { $0.closedPipes += 1 } })
        Self.drain(
            stderr, { text in output.withLock { $0.standardError += text } },
            closed: { output.withLock { $0.closedPipes += 1 } })
        startThread {
            let status = Subprocess.waitForExit(pid)
            output.withLock { $0.exited = status }
        }
    }

    private static func drain(
        _ descriptor: Int32, _ append: @escaping @Sendable (String) -> Void, closed: @escaping @Sendable () -> Void
    ) {
        startThread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                if count <= 0 { break }
                append(String(decoding: buffer[0..<count], as: UTF8.self))
            }
            close(descriptor)
            closed()
        }
    }

    public var standardOutput: String { output.withLock { $0.standardOutput } }
    public var standardError: String { output.withLock { $0.standardError } }
    public var exitStatus: Int32? { output.withLock { $0.exited } }

    public func signal(_ number: Int32) {
        kill(pid, number)
    }

    /// Waits for the exit (and the pipes' last bytes); returns the status.
    @discardableResult
    public func waitForExit(within limit: Duration = .seconds(60)) async throws -> Int32 {
        // Exited, and both pipes read to their end.
        try await waitUntil("keepalive \(pid) exits", timeout: limit) {
            self.output.withLock { $0.exited != nil && $0.closedPipes == 2 }
        }
        return exitStatus ?? -1
    }

    /// Kills it if still running (test clean-up).
    public func terminate() {
        if exitStatus == nil { kill(pid, SIGKILL) }
    }

    /// Runs `keepalive arguments` to the end.
    public static func run(_ arguments: [String], within limit: Duration = .seconds(60)) async throws -> (
        status: Int32, stdout: String, stderr: String
    ) {
        let process = try CommandProcess(arguments)
        defer { process.terminate() }
        let status = try await process.waitForExit(within: limit)
        return (status, process.standardOutput, process.standardError)
    }
}

/// A file in a fresh temporary directory, removed by `remove()`.
public struct TemporaryFile: Sendable {
    public let directory: String
    public let path: String

    public init(name: String, contents: String) throws {
        var template = Array("/tmp/keepalive-cli-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw POSIXFailure(errno: errno) }
        directory = String(cString: made)
        path = directory + "/" + name
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw POSIXFailure(errno: errno) }
        defer { close(descriptor) }
        let bytes = Array(contents.utf8)
        guard write(descriptor, bytes, bytes.count) == bytes.count else { throw POSIXFailure(errno: errno) }
    }

    public func remove() {
        _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", directory])
    }
}

public struct POSIXFailure: Error {
    public var errno: Int32
}
