#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A value behind a pthread mutex: the one lock every module of this package uses.
///
/// Why not `Synchronization.Mutex`: with Swift 6.3 on Linux, ThreadSanitizer does not see `Mutex`'s
/// synchronisation and reports every access it guards as a race (ten lines reproduce it: four threads
/// incrementing a dictionary inside `withLock`), which would make `--sanitize=thread` useless for the whole
/// project. pthread mutexes are intercepted by TSan. The cost is one allocation per lock; an uncontended
/// lock/unlock pair is a few tens of nanoseconds.
///
/// Give it a value with a size: TSan mis-reports inout access to a zero-sized `()` as racing with the lock's
/// own fields (to serialise work, count it: `Locked(0)`).
///
/// ```swift
/// let counts = Locked([String: Int]())
/// counts.withLock { $0["hci0", default: 0] += 1 }
/// ```
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only ever read or written between the mutex's lock and unlock.
    private let mutex = PthreadMutex()
    private var value: Value

    package init(_ value: Value) {
        self.value = value
    }

    deinit {
        mutex.destroy()
    }

    /// Runs `body` with exclusive access to the value. Never call back into the same lock from `body`.
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        mutex.lock()
        defer { mutex.unlock() }
        return try body(&value)
    }
}
