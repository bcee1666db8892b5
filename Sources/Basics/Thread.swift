package import CLinux

#if canImport(Glibc)
    import Glibc
#endif

/// The package's POSIX threads, all started here: the executors' workers, the timer thread, each D-Bus
/// connection's and MQTT client's, the signal reader, the watchdog's, and blocking reads that must not hold an
/// executor's thread (Foundation's `Thread` would link Foundation into the daemon).
package enum PlatformThread {
    /// Starts `body` on a thread of its own, named `name` (at most 15 bytes are kept, for `top -H`), which holds
    /// what `body` captured until it returns. Detached unless `joinable` (then ``join(_:)`` it); `stackSize` in
    /// bytes, or the system's default (8 MiB on glibc, of address space, not memory). The thread starts with the
    /// caller's signal mask. The thread, or `pthread_create`'s error number, with nothing started.
    package static func start(
        name: String?, joinable: Bool = false, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void
    ) -> Result<pthread_t, ThreadStartError> {
        let context = Unmanaged.passRetained(ThreadBody(name: name, body)).toOpaque()
        var thread = pthread_t()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        if let stackSize { pthread_attr_setstacksize(&attributes, stackSize) }
        let created = pthread_create(
            &thread, &attributes,
            { context in
                let work = Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue()
                // A thread inherits its creator's name (often an executor's worker): give it its own.
                if let name = work.name { name.withCString { clinux_set_thread_name($0) } }
                work.body()
                return nil
            }, context)
        guard created == 0 else {
            Unmanaged<ThreadBody>.fromOpaque(context).release()
            return .failure(ThreadStartError(number: created))
        }
        if !joinable { pthread_detach(thread) }
        return .success(thread)
    }

    /// Waits for a thread started `joinable` to end.
    package static func join(_ thread: pthread_t) {
        pthread_join(thread, nil)
    }
}

/// Why no thread was started: `pthread_create`'s error number (EAGAIN: out of threads).
package struct ThreadStartError: Error, Sendable, Hashable, CustomStringConvertible {
    package var number: Int32
    package var description: String { String(cString: strerror(number)) }
}

private final class ThreadBody: Sendable {
    let name: String?
    let body: @Sendable () -> Void

    init(name: String?, _ body: @escaping @Sendable () -> Void) {
        self.name = name.map { String(decoding: $0.utf8.prefix(15), as: UTF8.self) }
        self.body = body
    }
}

/// Runs `body` on a detached thread of its own (``PlatformThread``); false, with nothing started, when none could
/// be; the caller decides what that means.
package func startDetachedThread(_ body: @escaping @Sendable () -> Void) -> Bool {
    if case .success = PlatformThread.start(name: nil, body) { return true }
    return false
}

/// A pthread mutex, made and freed in one place: ``Locked`` is built on it, and owners whose critical sections do
/// not fit a closure (a thread's run loop that unlocks to wait) lock and unlock it by hand. A value: its owner
/// calls ``destroy()`` in its `deinit` (a class of its own would cost every lock a second allocation).
package struct PthreadMutex: @unchecked Sendable {
    // @unchecked Sendable: a pthread mutex is made to be shared between threads; the pointer never changes.
    fileprivate let raw: UnsafeMutablePointer<pthread_mutex_t>

    package init() {
        raw = .allocate(capacity: 1)
        raw.initialize(to: pthread_mutex_t())
        pthread_mutex_init(raw, nil)
    }

    /// Frees the mutex; once, by its owner, when nothing can lock it any more.
    package func destroy() {
        pthread_mutex_destroy(raw)
        raw.deinitialize(count: 1)
        raw.deallocate()
    }

    package func lock() {
        pthread_mutex_lock(raw)
    }

    package func unlock() {
        pthread_mutex_unlock(raw)
    }
}

/// A pthread condition variable on `CLOCK_MONOTONIC`, used with a ``PthreadMutex`` by owners that wait by hand
/// (an executor's idle workers). A value, like the mutex: its owner calls ``destroy()`` in its `deinit`.
package struct PthreadCondition: @unchecked Sendable {
    // @unchecked Sendable: a condition variable is made to be shared between threads; the pointer never changes.
    private let raw: UnsafeMutablePointer<pthread_cond_t>

    package init() {
        raw = .allocate(capacity: 1)
        raw.initialize(to: pthread_cond_t())
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(raw, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    /// Frees the condition variable; once, by its owner, when nothing can wait on it any more.
    package func destroy() {
        pthread_cond_destroy(raw)
        raw.deinitialize(count: 1)
        raw.deallocate()
    }

    /// Unlocks `mutex` (which the caller holds), waits for a signal, and locks it again.
    package func wait(_ mutex: PthreadMutex) {
        pthread_cond_wait(raw, mutex.raw)
    }

    /// As ``wait(_:)``, returning at the latest when `CLOCK_MONOTONIC` reaches `deadline` nanoseconds.
    package func wait(_ mutex: PthreadMutex, untilMonotonic deadline: Int64) {
        var time = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        _ = pthread_cond_timedwait(raw, mutex.raw, &time)
    }

    package func signal() {
        pthread_cond_signal(raw)
    }

    package func broadcast() {
        pthread_cond_broadcast(raw)
    }
}

/// `clock`'s time now in nanoseconds: `CLOCK_BOOTTIME` (suspend included, what `ContinuousClock` reads on Linux)
/// for deadlines, `CLOCK_MONOTONIC` (what `SuspendingClock` reads) where a peer's clock is that one. Integers,
/// because this is read around every D-Bus call and `Duration` arithmetic costs 128-bit multiplications.
package func clockNanoseconds(_ clock: clockid_t) -> Int64 {
    var time = timespec()
    clock_gettime(clock, &time)
    return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
}
