import Basics
import CLinux

#if canImport(Glibc)
    public import Glibc
#endif

/// Runs a program with `posix_spawnp` and collects its output on a thread of its own.
///
/// Waiting must not block the cooperative pool (the bus connections of this process must keep serving while a
/// CLI client calls them), and Foundation's `Process.waitUntilExit()` from async code hung once on these
/// machines.
///
/// ```swift
/// let output = try await Subprocess.run(["busctl", "--address=\(bus.address)", "tree", "org.bluez"])
/// #expect(output.status == 0)
/// ```
public enum Subprocess {
    /// What a finished program left behind.
    public struct Output: Sendable {
        /// The exit code, or 128 + the signal number when a signal ended it.
        public var status: Int32
        public var standardOutput: String
        public var standardError: String
    }

    /// Runs `arguments` (the first is looked up in `PATH`) to its end.
    public static func run(_ arguments: [String]) async throws -> Output {
        try await withCheckedThrowingContinuation { continuation in
            startThread {
                continuation.resume(with: Result { try runBlocking(arguments) })
            }
        }
    }

    /// Spawns `arguments` with stdin from /dev/null and stdout and stderr on pipes; returns the pid and the
    /// read ends (the caller closes them and reaps the pid).
    ///
    /// `ownProcessGroup` puts the child in a new process group (its pgid is its pid) instead of the caller's. A
    /// terminal sends Ctrl-C's SIGINT to its whole foreground process group: a service the caller still needs
    /// while it shuts down (the demo's private mosquitto, which the bridge drains its spool to) must not be in
    /// it, and the caller stops it itself when done. Only for such children: one in the caller's group is what
    /// makes a Ctrl-C'd test run take its helpers down with it.
    public static func spawn(_ arguments: [String], ownProcessGroup: Bool = false) throws -> (
        pid: Glibc.pid_t, stdout: Int32, stderr: Int32
    ) {
        precondition(!arguments.isEmpty, "Subprocess.spawn needs a program name")
        var outPipe: [Int32] = [0, 0]
        var errPipe: [Int32] = [0, 0]
        // Our pipe ends must not leak into a child another thread spawns meanwhile: a daemon that forks
        // (dbus-daemon --fork) would then hold our write end forever and readAll would never see EOF — this
        // hung a whole test run once two buses started together. So every end is close-on-exec from the start
        // (dup2 onto the child's 1 and 2 clears it there).
        guard clinux_pipe_cloexec(&outPipe) == 0 else { throw SubprocessError.spawnFailed(errno) }
        guard clinux_pipe_cloexec(&errPipe) == 0 else {
            let code = errno
            close(outPipe[0])
            close(outPipe[1])
            throw SubprocessError.spawnFailed(code)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        for fd in outPipe + errPipe { posix_spawn_file_actions_addclose(&actions, fd) }
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        // The child starts with no signal blocked and every signal at its default action. Without this it
        // inherits the spawning thread's mask (a libdispatch worker blocks most signals) and our SIG_IGN for
        // SIGTERM/SIGINT (signals are taken through DispatchSources), which survives exec: a private
        // dbus-daemon left behind by a killed demo could then only be removed with SIGKILL.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        if ownProcessGroup {
            posix_spawnattr_setpgroup(&attributes, 0)
            flags |= POSIX_SPAWN_SETPGROUP
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, environ)
        close(outPipe[1])
        close(errPipe[1])
        guard result == 0 else {
            close(outPipe[0])
            close(errPipe[0])
            throw SubprocessError.spawnFailed(result)
        }
        return (pid, outPipe[0], errPipe[0])
    }

    /// Runs `arguments` to its end on the calling thread.
    public static func runBlocking(_ arguments: [String]) throws -> Output {
        let (pid, stdout, stderr) = try spawn(arguments)
        // stderr is small for every tool we run; read stdout to the end first, then stderr.
        let out = readAll(stdout)
        let err = readAll(stderr)
        return Output(status: waitForExit(pid), standardOutput: out, standardError: err)
    }

    /// Waits for the child `pid` to end and returns its exit code (128 + signal when a signal ended it).
    public static func waitForExit(_ pid: Glibc.pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    /// Reads `fd` to its end and closes it.
    public static func readAll(_ fd: Int32) -> String {
        defer { close(fd) }
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            if count <= 0 { break }
            data.append(contentsOf: buffer[0..<count])
        }
        return String(decoding: data, as: UTF8.self)
    }
}

/// A program could not be started; `errno` or the `posix_spawn` result.
public enum SubprocessError: Error, Sendable {
    case spawnFailed(Int32)
}

extension Subprocess {
    /// Runs `arguments` to the end; its exit status, or -1 when it could not be started.
    public static func runBlockingIgnoringErrors(_ arguments: [String]) -> Int32 {
        (try? runBlocking(arguments).status) ?? -1
    }
}
