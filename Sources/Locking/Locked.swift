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
    // @unchecked Sendable: `value` is only ever read or written between pthread_mutex_lock and _unlock.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value. Never call back into the same lock from `body`.
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
