import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Runs a program with posix_spawn and collects its output, on a thread of its own: waiting must not
/// block the cooperative pool (the bus connections in this process must keep serving while a CLI client
/// calls them), and Foundation's `Process.waitUntilExit()` from async code hung once on these machines.
struct Subprocess {
    struct Output: Sendable {
        var status: Int32
        var standardOutput: String
        var standardError: String
    }

    static func run(_ arguments: [String]) async throws -> Output {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(with: Result { try runBlocking(arguments) })
            }
            thread.start()
        }
    }

    /// Spawns `arguments` with stdout and stderr on pipes; returns the pid and the read ends.
    static func spawn(_ arguments: [String], stdin: Int32? = nil) throws -> (pid: pid_t, stdout: Int32, stderr: Int32) {
        var outPipe: [Int32] = [0, 0]
        var errPipe: [Int32] = [0, 0]
        guard pipe(&outPipe) == 0, pipe(&errPipe) == 0 else { throw SubprocessError.spawnFailed(errno) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        for fd in outPipe + errPipe { posix_spawn_file_actions_addclose(&actions, fd) }
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, arguments[0], &actions, nil, argv, environ)
        close(outPipe[1])
        close(errPipe[1])
        guard result == 0 else {
            close(outPipe[0])
            close(errPipe[0])
            throw SubprocessError.spawnFailed(result)
        }
        return (pid, outPipe[0], errPipe[0])
    }

    static func runBlocking(_ arguments: [String]) throws -> Output {
        let (pid, stdout, stderr) = try spawn(arguments)
        // stderr is small for every tool we run; read stdout to the end first, then stderr.
        let out = readAll(stdout)
        let err = readAll(stderr)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        let exitCode = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return Output(status: exitCode, standardOutput: out, standardError: err)
    }

    static func readAll(_ fd: Int32) -> String {
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

enum SubprocessError: Error {
    case spawnFailed(Int32)
}
