@testable import DBus
import LocalServices
import TestHarness
import Basics

#if canImport(Glibc)
    import Glibc
#endif

// Helpers for the tests of the connection's thread (`ConnectionThreadTests.swift`): this process's threads as
// /proc shows them, waits that give up even on work that never finishes, weak references, and work to run on
// a thread (an actor on it, a log of what ran there, a chain that keeps its queue full).

/// This process's threads, from /proc/self/task.
enum Threads {
    /// The calling thread's id: the last component of /proc/thread-self (`PID/task/TID`).
    static func currentID() -> Int32 {
        var buffer = [CChar](repeating: 0, count: 64)
        let count = readlink("/proc/thread-self", &buffer, buffer.count - 1)
        guard count > 0 else { return -1 }
        let path = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return path.split(separator: "/").last.flatMap { Int32($0) } ?? -1
    }

    static func exists(_ id: Int32) -> Bool {
        access("/proc/self/task/\(id)", F_OK) == 0
    }

    static func count() -> Int {
        guard let directory = opendir("/proc/self/task") else { return 0 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            if entry.pointee.d_name.0 != CChar(UInt8(ascii: ".")) { count += 1 }
        }
        return count
    }

    /// The kernel's id of the thread that runs `thread`'s work now.
    static func id(of thread: ConnectionThread) async throws -> Int32 {
        try await bounded("the thread runs a block") {
            await withCheckedContinuation { continuation in
                thread.async { continuation.resume(returning: Threads.currentID()) }
            }
        }
    }
}

/// Runs `body` in a task of its own and waits for it at most `timeout`. Unlike `withTimeout`, whose task group
/// waits for a cancelled body to finish, this gives up on a body that never does (a continuation the thread
/// never resumes because it lost the work): the test fails instead of hanging the run.
func bounded<T: Sendable>(
    _ what: String, _ timeout: Duration = .seconds(10), _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let outcome = Locked<Result<T, any Error>?>(nil)
    let task = Task {
        let result: Result<T, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        outcome.withLock { $0 = result }
    }
    do {
        try await waitUntil(what, timeout: timeout) { outcome.withLock { $0 != nil } }
    } catch {
        task.cancel()
        throw error
    }
    guard let result = outcome.withLock({ $0 }) else { throw TimedOut(what: what) }
    return try result.get()
}

/// A reference that does not keep its object alive.
struct Weak<Object: AnyObject & Sendable>: Sendable {
    weak let object: Object?
    init(_ object: Object) { self.object = object }
}

extension Descriptors {
    /// What this process's descriptors are (socket, pipe, anon_inode:[eventpoll], …) and how many of each, for
    /// failure messages.
    static func kinds() -> [String: Int] {
        var kinds: [String: Int] = [:]
        guard let directory = opendir("/proc/self/fd") else { return kinds }
        defer { closedir(directory) }
        let own = dirfd(directory)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let number = Int32(name), number != own else { continue }
            var buffer = [CChar](repeating: 0, count: 256)
            let count = readlink("/proc/self/fd/\(number)", &buffer, buffer.count - 1)
            let target =
                count > 0 ? String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
            kinds[target.hasPrefix("anon_inode:") ? target : String(target.prefix { $0 != ":" }), default: 0] += 1
        }
        return kinds
    }
}

/// Keeps the calling thread busy for `nanoseconds` (a slow signal handler).
func spin(nanoseconds: Int64) {
    let end = ConnectionThread.now() + nanoseconds
    while ConnectionThread.now() < end {}
}

/// An actor whose executor is a given `ConnectionThread`, as `DBusConnection`'s is.
actor Recorder {
    let thread: ConnectionThread

    init(thread: ConnectionThread) {
        self.thread = thread
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor {
        thread.asUnownedSerialExecutor()
    }

    /// Starts a task isolated to `recorder` (it captures the isolated parameter): its first job is an actor
    /// job, queued on the thread now.
    static func startTask(on recorder: isolated Recorder, _ index: Int, _ log: RunLog) {
        Task {
            _ = recorder
            log.record(index)
        }
    }
}

/// What ran, in order, and how much of it ran elsewhere than on `thread`.
final class RunLog: Sendable {
    private let thread: ConnectionThread
    private let state = Locked((indices: [Int](), offThread: 0))

    init(thread: ConnectionThread) {
        self.thread = thread
    }

    var indices: [Int] { state.withLock { $0.indices } }
    var offThread: Int { state.withLock { $0.offThread } }

    func record(_ index: Int) {
        let isCurrent = thread.isCurrent
        state.withLock { state in
            state.indices.append(index)
            if !isCurrent { state.offThread += 1 }
        }
    }

    func reset() {
        state.withLock { $0 = ([], 0) }
    }
}

/// Work that queues its next step on a thread for as long as it runs: the thread's queue never empties.
final class BusyChain: Sendable {
    private let thread: ConnectionThread
    private let state = Locked((running: false, steps: 0))

    init(on thread: ConnectionThread) {
        self.thread = thread
    }

    var steps: Int { state.withLock { $0.steps } }

    func start() {
        state.withLock { $0.running = true }
        thread.async { self.step() }
    }

    func stop() {
        state.withLock { $0.running = false }
    }

    private func step() {
        let running = state.withLock { state in
            state.steps += 1
            return state.running
        }
        if running { thread.async { self.step() } }
    }
}
