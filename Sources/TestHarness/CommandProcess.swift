public import LocalServices
import Basics

#if canImport(Glibc)
    public import Glibc
#endif

/// This test bundle's executable.
public let testExecutable: String = {
    var buffer = [CChar](repeating: 0, count: 4_096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    return count > 0 ? String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
}()

/// The built `keepalive` binary, next to this test bundle (`.build/<triple>/debug/`, or the TSan scratch path).
public let keepaliveBinary: String = {
    let directory = testExecutable.split(separator: "/", omittingEmptySubsequences: false).dropLast()
    return directory.joined(separator: "/") + "/keepalive"
}()

/// This test bundle started again, running only the test `named` with `variable` set to `value` in its
/// environment: for a test that must run alone in a process (one killed with SIGKILL, one under a resource limit).
/// The child test is enabled only when `variable` is set.
public func childTestProcess(running named: String, with variable: String, _ value: String) throws -> WatchedProcess {
    try WatchedProcess([
        "env", "\(variable)=\(value)", testExecutable, "--testing-library", "swift-testing", "--filter", named,
    ])
}

/// Flips the bits of `mask` in the byte at `offset` of the file at `path` (damage as flash makes it).
public func flipBits(_ mask: UInt8, at offset: Int, of path: String) throws {
    let descriptor = open(path, O_RDWR | O_CLOEXEC)
    guard descriptor >= 0 else { throw SystemCallFailed(errno: errno) }
    defer { close(descriptor) }
    var byte: UInt8 = 0
    guard pread(descriptor, &byte, 1, off_t(offset)) == 1 else { throw SystemCallFailed(errno: errno) }
    byte ^= mask
    guard pwrite(descriptor, &byte, 1, off_t(offset)) == 1 else { throw SystemCallFailed(errno: errno) }
}

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
    /// execs in place: `pid` is keepalive's). `ownProcessGroup` starts it as a shell with job control starts a
    /// command, in a process group of its own, so that ``signalGroup(_:)`` is what a terminal's Ctrl-C does.
    ///
    /// `user` runs it as another uid and gid, with exactly `groups` as supplementary groups (through
    /// `setpriv(1)`, which also execs in place; the test process must be root).
    public init(
        _ arguments: [String], environment: [String: String] = [:], ownProcessGroup: Bool = false,
        user: (uid: uid_t, gid: gid_t, groups: [gid_t])? = nil
    ) throws {
        var prefix =
            environment.isEmpty
            ? [] : ["/usr/bin/env"] + environment.keys.sorted().map { "\($0)=\(environment[$0] ?? "")" }
        if let user {
            prefix += [
                "/usr/bin/setpriv", "--reuid=\(user.uid)", "--regid=\(user.gid)",
                user.groups.isEmpty
                    ? "--clear-groups" : "--groups=" + user.groups.map(String.init).joined(separator: ","),
            ]
        }
        let (pid, stdout, stderr) = try Subprocess.spawn(
            prefix + [keepaliveBinary] + arguments, ownProcessGroup: ownProcessGroup)
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

    /// Where both outputs end now. Taken just before the event a test provokes, it lets a wait look only at what
    /// came after it: a log line the daemon wrote earlier (the same line, for an earlier event) must not pass for
    /// the one the event causes.
    ///
    /// ```swift
    /// let mark = process.mark()
    /// try simulator.wedge()
    /// try await waitUntil("the recovery logged") { process.standardError(since: mark).contains("…") }
    /// ```
    public func mark() -> OutputMark {
        output.withLock {
            OutputMark(standardOutput: $0.standardOutput.utf8.count, standardError: $0.standardError.utf8.count)
        }
    }

    /// What came on standard output after `mark`.
    public func standardOutput(since mark: OutputMark) -> String {
        Self.text(standardOutput, after: mark.standardOutput)
    }

    /// What came on standard error after `mark`.
    public func standardError(since mark: OutputMark) -> String {
        Self.text(standardError, after: mark.standardError)
    }

    /// The output only grows, chunk by decoded chunk, so an offset taken from it is on a scalar boundary.
    private static func text(_ whole: String, after offset: Int) -> String {
        String(decoding: whole.utf8.dropFirst(offset), as: UTF8.self)
    }

    public func signal(_ number: Int32) {
        kill(pid, number)
    }

    /// Sends `number` to keepalive's whole process group, as a terminal sends Ctrl-C's SIGINT to its foreground
    /// job: keepalive and every child it left in its group. Only for one started with `ownProcessGroup` (else
    /// the group is the test runner's).
    public func signalGroup(_ number: Int32) {
        kill(-pid, number)
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

/// A place in a ``CommandProcess``'s outputs (their lengths in UTF-8 bytes at ``CommandProcess/mark()``).
public struct OutputMark: Sendable, Hashable {
    public let standardOutput: Int
    public let standardError: Int
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
