import Dispatch

/// The serial executor of a `DBusConnection`: one serial `DispatchQueue` runs the actor's jobs *and* every
/// libdbus callback (watch and timeout sources, the message filter, pending-call notifications).
///
/// Keeping both on one queue is what makes libdbus safe to drive from Swift: libdbus callbacks can touch
/// actor state synchronously (`assumeIsolated`), and the connection is never entered from two threads.
///
/// ```swift
/// let executor = DBusQueueExecutor(label: "dbus")
/// executor.queue.async { executor.checkIsolated() }   // passes: we are on the queue
/// ```
final class DBusQueueExecutor: SerialExecutor {
    let queue: DispatchQueue
    /// Marks `queue` so that code can ask "am I on it?" without trapping.
    private let key = DispatchSpecificKey<Bool>()

    init(label: String) {
        queue = DispatchQueue(label: label)
        queue.setSpecific(key: key, value: true)
    }

    /// True when the current thread is running `queue` (then no hop is needed to reach the connection).
    var isCurrent: Bool {
        DispatchQueue.getSpecific(key: key) == true
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Lets `assumeIsolated` succeed inside DispatchSource handlers and libdbus callbacks, which run on the
    /// queue but outside any task; traps anywhere else.
    func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue))
    }
}
