import Basics
import Synchronization
import Testing

#if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS
    @_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency
    @testable import QuietExecutor
#endif

/// A continuation resumed from another thread before its task reaches the await, as a D-Bus reply can be
/// (`DBusConnection.waitForReply`): the task goes on at once with what the resumer left. Under ThreadSanitizer this
/// path is the one `Tests/ThreadSanitizer.supp` explains: without that suppression each test here reports a race
/// in `withUnsafeContinuation` (CI fails on any report); with it, none. A toolchain whose symbol changes brings the
/// report back, and CI says so.
@Suite struct ResumeBeforeAwaitTests {
    final class Resumed: Sendable { let done = Atomic<Bool>(false) }

    /// The body waits (a relaxed flag: no ordering ThreadSanitizer could take for one) until a thread of its own
    /// has resumed the continuation and returned, so that the task finds it resumed.
    nonisolated(nonsending) static func resumedBeforeTheAwait(_ value: Int) async -> Int {
        let resumed = Resumed()
        let left = Locked(0)
        await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
            let started = PlatformThread.start(name: "resumer") {
                left.withLock { $0 = value }
                continuation.resume()
                resumed.done.store(true, ordering: .relaxed)
            }
            guard case .success = started else {
                continuation.resume()
                return
            }
            while !resumed.done.load(ordering: .relaxed) {}
        }
        return left.withLock { $0 }
    }

    static func sum(_ rounds: Int) async -> Int {
        var sum = 0
        for round in 0..<rounds { sum += await resumedBeforeTheAwait(round) }
        return sum
    }

    @Test func onTheStockExecutors() async {
        #expect(await Task.detached { await Self.sum(20) }.value == 190)
    }

    #if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS
        @Test func onTheProjectsPool() async {
            let pool = QuietGlobalExecutor(threads: 2)
            defer { pool.shutdown() }
            #expect(await Task(executorPreference: pool) { await Self.sum(20) }.value == 190)
        }
    #endif
}
