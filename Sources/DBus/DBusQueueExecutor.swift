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
final class DBusQueueExecutor: SerialExecutor, TaskExecutor {
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
        let serial = asUnownedSerialExecutor()
        let task = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(isolatedTo: serial, taskExecutor: task) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Also a task executor: exported methods' handlers start on the queue, in the order their calls arrived
    /// (see `replyLater`).
    func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    /// Lets `assumeIsolated` succeed inside DispatchSource handlers and libdbus callbacks, which run on the
    /// queue but outside any task; traps anywhere else.
    func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue))
    }
}
