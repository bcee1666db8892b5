public import DBus
import LocalServices
import Basics
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Runs `body`, throwing `TimedOut` if it has not finished after `timeout` (so a broken test fails instead of
/// hanging the run). `body` is cancelled then. A give-up, not a timing assertion: under a sanitizer it is
/// `Sanitizers.slowdown` times longer, as `waitUntil`'s is.
///
/// ```swift
/// let reply = try await withTimeout("the call fails") { try await pending.value }
/// ```
public func withTimeout<T: Sendable>(
    _ what: String, _ timeout: Duration = .seconds(10), _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout * Sanitizers.slowdown)
            throw TimedOut(what: what)
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw TimedOut(what: what) }
        return first
    }
}

/// Reads `stream` until `isLast` holds for a signal (included), failing after `timeout`.
///
/// ```swift
/// let signals = try await collect(stream) { $0.member == "InterfacesRemoved" }
/// ```
public func collect(
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

/// The resident set size (VmRSS in /proc/PID/status) of this process, or of `pid`, in kilobytes; 0 when
/// unreadable. procfs files report size 0, so the file is read line by line.
public func residentSetKilobytes(of pid: Int32? = nil) -> Int {
    guard let file = fopen(pid.map { "/proc/\($0)/status" } ?? "/proc/self/status", "r") else { return 0 }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard text.hasPrefix("VmRSS:") else { continue }
        return Int(text.dropFirst(6).split { $0 == " " || $0 == "\t" || $0 == "\n" }.first ?? "") ?? 0
    }
    return 0
}

/// Runs `body` on a thread of its own, at the lowest priority (see ``lowerThisThreadsPriority()``), and returns what
/// it returns. For a test that computes for seconds (the spool's exhaustive damage cases, the fleet simulations):
/// on the concurrency pool's few threads it would starve every other test's waits on a 2-core machine, and on
/// threads of their own at the usual priority these tests still took most of both cores for the suite's first
/// minute — CI's pool then ran every other test 32 s late, and a doctor's 3-s give-up and a 30-s sleep ran out
/// before their tests could look. And one at a time (``oneHeavyComputationAtATime(_:)``). `body` must not record
/// issues (`#expect` needs the test's task): return what to check.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        startThread {
            lowerThisThreadsPriority()
            continuation.resume(with: Result { try oneHeavyComputationAtATime(body) })
        }
    }
}

private let heavyComputation = Mutex(())

/// Runs `body` (on a thread of its own, never on the pool: it blocks) while no other test's long computation runs.
/// Under a sanitizer, where they run at the usual priority, the spool's four exhaustive damage cases and a fleet
/// simulation ran at once: five busy threads beside the pool's two on two cores, and ThreadSanitizer's suite
/// finished no test between 25 s and 60 s of its run, so five 60-s give-ups ran out. One at a time leaves the
/// pool a core.
public func oneHeavyComputationAtATime<T>(_ body: () throws -> T) rethrows -> T {
    try heavyComputation.withLock { _ in try body() }
}

/// Gives the calling thread the lowest scheduling priority (nice 19), so that it gets what the rest of the suite
/// leaves: a trivial test then finished 12.8 s into the plain suite instead of 25.4 s. On Linux the nice value is a
/// thread's, not the process's: `setpriority(PRIO_PROCESS, 0, …)` changes the calling thread only.
///
/// Not under a sanitizer. There a thread at nice 19 held up every other thread (most likely through the runtime's
/// own locks, which it then holds while it waits for the CPU): under ThreadSanitizer a trivial test finished 211 s
/// into the suite instead of about 24 s, and 106 give-ups ran out. The sanitizer runs already make these
/// computations small.
public func lowerThisThreadsPriority() {
    guard !Sanitizers.thread, !Sanitizers.address else { return }
    _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
}
