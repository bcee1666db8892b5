import CLinux
import Dispatch
import Basics
#if canImport(Glibc)
    import Glibc
#endif

/// The executor of one `DBusConnection`: a thread of its own that waits in `epoll_wait` on the bus socket and
/// runs, in order, the actor's jobs, jobs of tasks that prefer it (`withTaskExecutorPreference`), every libdbus
/// callback (socket readiness, the message filter, libdbus's timeouts) and the method calls' timeouts; the
/// earliest of its deadlines is the `epoll_wait` timeout.
///
/// Why a thread and not a serial `DispatchQueue` with `DispatchSource`s (the first design): a reply then took
/// two thread wake-ups before the waiting task ran (libdispatch's manager thread sees the socket, then wakes a
/// worker for the queue) and the task resumed on yet another thread of the cooperative pool. Here the reply is
/// read, dispatched and its task resumed on the thread that waited for it: one wake-up per reply, as in a C
/// client blocked in `poll`. A task running on this thread that sends a call and awaits the reply makes no
/// thread switch at all. Idle, the thread sleeps in `epoll_wait` without a timeout: no wake-ups.
///
/// Work from other threads is queued under a lock and, when the thread is asleep, announced through an
/// `eventfd`; work queued on the thread itself costs no system call.
///
/// The thread hosts timers too (``timers``, a `TimerThread` without a thread, its timerfd in the same `epoll`
/// set): a `TimerFDClock` sleep or call armed on this thread fires on it. A daemon whose scheduler and ledger run
/// here then wakes this one thread at its tick, not the timer thread first. When the thread ends for good, what
/// is still armed moves to the process's timer thread.
///
/// ```swift
/// let thread = try ConnectionThread(name: "dbus")
/// thread.async { precondition(thread.isCurrent) }
/// ```
final class ConnectionThread: SerialExecutor, @unchecked Sendable {
    // @unchecked Sendable: `pending`, `isSleeping`, `isStopping`, `isRunning`, `restartsToFailForTesting`,
    // `waitSet` and `taskRole` are touched only under `mutex` (`waitSet` is written on the thread only, which may
    // read it without); `handlers` only on the thread (one at a time: a new one starts only after the last has
    // left its loop).

    fileprivate enum Work {
        /// A job of the actor (`DBusConnection`): isolated to this thread as its serial executor.
        case actorJob(UnownedJob, UnownedSerialExecutor)
        /// A job of a task that prefers this thread (``taskExecutor``), running nonisolated code.
        case taskJob(UnownedJob, UnownedTaskExecutor)
        case block(() -> Void)
    }

    /// The task-executor face of the thread, an object of its own so that its jobs run *nonisolated*: were a
    /// preferring task's jobs run as isolated to the actor's executor, every step between nonisolated functions
    /// would count as an executor switch and be queued again (several trips through the queue per D-Bus call
    /// instead of one, as strace showed).
    final class TaskRole: TaskExecutor, Sendable {
        /// Strong: a task may hold its preferred executor after everyone else has let go of the connection (a
        /// poll started before a reconnection), and its jobs must still find a thread.
        let thread: ConnectionThread

        init(thread: ConnectionThread) {
            self.thread = thread
        }

        func enqueue(_ job: consuming ExecutorJob) {
            thread.queue(.taskJob(UnownedJob(job), asUnownedTaskExecutor()))
        }

        func asUnownedTaskExecutor() -> UnownedTaskExecutor {
            UnownedTaskExecutor(ordinary: self)
        }
    }

    /// Where tasks that should run on this thread (exported methods' handlers, `withTaskExecutorPreference`)
    /// send their jobs: one object for as long as anyone holds it (`DBusConnection` does, for its whole life).
    var taskExecutor: TaskRole {
        mutex.lock()
        defer { mutex.unlock() }
        if let taskRole { return taskRole }
        let role = TaskRole(thread: self)
        taskRole = role
        return role
    }

    /// The epoll descriptor and the eventfd a thread waits on (and the hosted timers' timerfd, which it does not
    /// own), closed when the last holder lets go: the thread once it has ended for good, or a waker that was
    /// writing to `wakeup` just then.
    private final class WaitSet: Sendable {
        let epoll: Int32
        let wakeup: Int32

        /// Throws when the process is out of descriptors.
        init(timers: Int32?) throws(DBusError) {
            epoll = clinux_epoll_create()
            let epollErrno = errno
            wakeup = clinux_eventfd()
            let wakeupErrno = errno
            guard epoll >= 0, wakeup >= 0 else {
                if epoll >= 0 { close(epoll) }
                if wakeup >= 0 { close(wakeup) }
                throw DBusError(
                    code: .systemCall,
                    message: "cannot create the D-Bus connection's epoll descriptor and eventfd: "
                        + String(cString: strerror(epoll < 0 ? epollErrno : wakeupErrno)))
            }
            _ = clinux_epoll_control(epoll, clinux_epoll_ctl_add, wakeup, clinux_epollin)
            if let timers { _ = clinux_epoll_control(epoll, clinux_epoll_ctl_add, timers, clinux_epollin) }
        }

        /// For a thread restarted for late work of a stopped connection, which (nearly) never waits: out of
        /// descriptors there, there is nothing better to do than stop.
        static func make(timers: Int32?) -> WaitSet {
            do {
                return try WaitSet(timers: timers)
            } catch {
                preconditionFailure("\(error)")
            }
        }

        deinit {
            close(epoll)
            close(wakeup)
        }

        func signal() {
            var one: UInt64 = 1
            _ = write(wakeup, &one, MemoryLayout<UInt64>.size)
        }
    }

    /// The descriptor's handler, given the `epoll` events that occurred (EPOLLIN, EPOLLOUT, EPOLLHUP, EPOLLERR).
    typealias Handler = (_ events: UInt32) -> Void

    private let mutex = PthreadMutex()
    private var pending: [Work] = []
    /// The thread is in (or about to enter) a blocking `epoll_wait`: whoever queues work must write to `wakeup`.
    private var isSleeping = false
    private var isStopping = false
    /// A thread runs the loop (false after it ended on ``stop()``; late work starts another).
    private var isRunning = false
    /// How many of the next restarts act as if `pthread_create` failed (tests of running out of threads).
    private var restartsToFailForTesting = 0
    private let name: String
    private var waitSet: WaitSet?
    /// Timers armed on this thread (see the type's comment).
    let timers: TimerThread
    /// Their timerfd while the thread hosts them; nil once they are handed over (closed, its number free for
    /// reuse). On the thread only (set to nil under `mutex`, as the thread ends).
    private var timersDescriptor: Int32?
    private weak var taskRole: TaskRole?
    /// Registered descriptors, on the thread only.
    private var handlers: [Int32: Handler] = [:]
    /// Who sets a deadline on the thread: each has one, and its own handler.
    enum DeadlineOwner: CaseIterable {
        /// libdbus's earliest timeout (`MainLoop`).
        case libdbus
        /// The earliest timeout of the connection's outstanding method calls.
        case calls
    }

    /// When to call each owner's handler (nanoseconds since boot, ``now()``), on the thread only; the earliest
    /// is the `epoll_wait` timeout. Two properties, not an array: they are set twice per method call.
    private var libdbusDeadline: Int64?
    private var callsDeadline: Int64?
    private var libdbusDeadlineHandler: (() -> Void)?
    private var callsDeadlineHandler: (() -> Void)?
    /// The earlier of the two.
    private var deadline: Int64?

    /// Starts the thread (named `name`, at most 15 bytes, for top -H). It runs until ``stop()`` and then until its
    /// queue is empty. Throws `DBusError.Code.systemCall` when the process is out of descriptors or threads.
    init(name: String) throws(DBusError) {
        guard let timers = TimerThread.hosted() else {
            throw DBusError(
                code: .systemCall,
                message: "cannot create the D-Bus connection's timerfd: " + String(cString: strerror(errno)))
        }
        self.name = name
        self.timers = timers
        timersDescriptor = timers.descriptor
        waitSet = try WaitSet(timers: timers.descriptor)
        isRunning = true
        let created = startThread()
        guard created == 0 else {
            throw DBusError(
                code: .systemCall,
                message: "cannot start the D-Bus connection's thread: " + String(cString: strerror(created)))
        }
    }

    deinit {
        mutex.destroy()
    }

    /// Identifies the running `ConnectionThread` on its thread (`isCurrent`).
    private static let currentKey: pthread_key_t = {
        var key = pthread_key_t()
        let created = pthread_key_create(&key, nil)
        precondition(created == 0, "pthread_key_create failed: \(created)")
        return key
    }()

    /// Starts a thread that runs the loop, holding `self` until the loop ends; pthread_create's result.
    private func startThread() -> Int32 {
        let started = PlatformThread.start(name: name) { [self] in
            pthread_setspecific(ConnectionThread.currentKey, Unmanaged.passUnretained(self).toOpaque())
            TimerThread.setCurrentHost(timers)
            run()
            TimerThread.setCurrentHost(nil)
            pthread_setspecific(ConnectionThread.currentKey, nil)
        }
        switch started {
        case .success: return 0
        case .failure(let error): return error.number
        }
    }

    /// True on the connection's thread (then no hop is needed to reach the connection).
    var isCurrent: Bool {
        pthread_getspecific(Self.currentKey) == Unmanaged.passUnretained(self).toOpaque()
    }

    /// Runs `block` on the thread, after the work queued before it.
    func async(_ block: @escaping @Sendable () -> Void) {
        queue(.block(block))
    }

    /// Lets the thread end once its queue is empty. Work queued later still runs (by a thread started for it),
    /// so a late job of a finished connection is not lost.
    func stop() {
        mutex.lock()
        isStopping = true
        let waker = isSleeping ? waitSet : nil
        isSleeping = false
        mutex.unlock()
        waker?.signal()
    }

    // MARK: Executor

    func enqueue(_ job: consuming ExecutorJob) {
        queue(.actorJob(UnownedJob(job), asUnownedSerialExecutor()))
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Lets `assumeIsolated` succeed inside libdbus callbacks, which run on the thread but outside any job;
    /// traps anywhere else.
    func checkIsolated() {
        precondition(isCurrent, "not on the D-Bus connection's thread")
    }

    func isIsolatingCurrentContext() -> Bool? {
        isCurrent
    }

    // MARK: Descriptors (on the thread only)

    /// Watches `fd` for `events` (level-triggered); 0 removes it (epoll would still report hang-ups, which a
    /// disabled libdbus watch must not see).
    func watch(_ fd: Int32, events: UInt32, handler: @escaping Handler) {
        let known = handlers[fd] != nil
        guard events != 0 else {
            if known { unwatch(fd) }
            return
        }
        handlers[fd] = handler
        let epoll = currentWaitSet().epoll
        if clinux_epoll_control(epoll, known ? clinux_epoll_ctl_mod : clinux_epoll_ctl_add, fd, events) != 0 {
            // ENOENT: the descriptor was closed (and so left the epoll set) while still registered here.
            _ = clinux_epoll_control(epoll, clinux_epoll_ctl_add, fd, events)
        }
    }

    func unwatch(_ fd: Int32) {
        guard handlers.removeValue(forKey: fd) != nil else { return }
        // Fails harmlessly (EBADF/ENOENT) when libdbus has already closed the socket: the registration left with it,
        // as libdbus opens its sockets with SOCK_CLOEXEC, so no spawned process holds one open. (libmosquitto does
        // not, and MQTT's ClientThread registers a duplicate of its own for that reason.)
        _ = clinux_epoll_control(currentWaitSet().epoll, clinux_epoll_ctl_del, fd, 0)
    }

    /// Calls `owner`'s handler on the thread at `deadline` (nanoseconds since boot, ``now()``), never before;
    /// nil clears it. One deadline per owner. On the thread only.
    func setDeadline(_ deadline: Int64?, for owner: DeadlineOwner) {
        switch owner {
        case .libdbus: libdbusDeadline = deadline
        case .calls: callsDeadline = deadline
        }
        if let deadline, self.deadline.map({ deadline <= $0 }) ?? true {
            self.deadline = deadline
            return
        }
        switch (libdbusDeadline, callsDeadline) {
        case (let first?, let second?): self.deadline = min(first, second)
        case (let only?, nil), (nil, let only?): self.deadline = only
        case (nil, nil): self.deadline = nil
        }
    }

    /// What runs when `owner`'s deadline has come (it is cleared first). On the thread only.
    func setDeadlineHandler(for owner: DeadlineOwner, _ handler: (() -> Void)?) {
        switch owner {
        case .libdbus: libdbusDeadlineHandler = handler
        case .calls: callsDeadlineHandler = handler
        }
    }

    /// `CLOCK_BOOTTIME` in nanoseconds (``clockNanoseconds(_:)``).
    static func now() -> Int64 {
        clockNanoseconds(CLOCK_BOOTTIME)
    }

    // MARK: The loop

    fileprivate func queue(_ work: Work) {
        mutex.lock()
        pending.append(work)
        // Held until written to: the thread may run this work, end and let go of its descriptors meanwhile.
        let waker = isSleeping ? waitSet : nil
        isSleeping = false
        let restart = !isRunning
        isRunning = true
        let failRestart = restart && restartsToFailForTesting > 0
        if failRestart { restartsToFailForTesting -= 1 }
        mutex.unlock()
        waker?.signal()
        // Work for a stopped connection (a call failing "closed", a late cancellation) still runs, in order.
        // Without a thread it would never run and its task would hang.
        if restart, failRestart || startThread() != 0 { runOnBorrowedThread() }
    }

    /// Makes the next `count` restarts fail as if the process were out of threads.
    func failRestartsForTesting(_ count: Int) {
        mutex.lock()
        restartsToFailForTesting = count
        mutex.unlock()
    }

    /// Out of threads (pthread_create failed) when late work came for a stopped connection: runs the loop on one
    /// of libdispatch's existing worker threads instead. The loop ends as soon as the queue is empty (the
    /// connection is stopped: nothing is left to wait for), and it runs as this thread (``isCurrent`` holds), one
    /// loop at a time like any restart.
    private func runOnBorrowedThread() {
        DispatchQueue.global().async { [self] in
            let previous = pthread_getspecific(ConnectionThread.currentKey)
            pthread_setspecific(ConnectionThread.currentKey, Unmanaged.passUnretained(self).toOpaque())
            let previousTimers = TimerThread.setCurrentHost(timers)
            run()
            TimerThread.setCurrentHost(previousTimers)
            pthread_setspecific(ConnectionThread.currentKey, previous)
        }
    }

    /// The descriptors to wait on, made again for a thread restarted for late work that waits. On the thread.
    private func currentWaitSet() -> WaitSet {
        if let waitSet { return waitSet }
        let made = WaitSet.make(timers: timersDescriptor)
        mutex.lock()
        waitSet = made
        mutex.unlock()
        return made
    }

    private func run() {
        var batch: [Work] = []
        var batchesInARow = 0
        var descriptors = [Int32](repeating: 0, count: 32)
        var events = [UInt32](repeating: 0, count: 32)
        while true {
            mutex.lock()
            if pending.isEmpty {
                if isStopping {
                    isRunning = false
                    // The descriptors go with the thread (a closed connection still referenced holds none),
                    // unless something is still registered in them.
                    if handlers.isEmpty { waitSet = nil }
                    // Nothing here will wait for them any more: the timer thread fires what is still armed.
                    // Under the mutex: a thread started for late work once it is released must find them gone.
                    timers.handOver()
                    timersDescriptor = nil
                    mutex.unlock()
                    break
                }
                if waitSet == nil { waitSet = WaitSet.make(timers: timersDescriptor) }
                let wait = waitSet!
                let timeout = Self.milliseconds(until: deadline)
                // A wait that returns at once needs no wake-up: work queued meanwhile is seen next round.
                isSleeping = timeout != 0
                mutex.unlock()
                let ready = waitForDescriptors(wait, timeout: timeout, &descriptors, &events)
                // Timed out, or the deadline had passed already (a steady stream of messages must not keep
                // postponing it): read the clock only then.
                if timeout == 0 || (timeout > 0 && !ready) { fireDeadline() }
                batchesInARow = 0
                continue
            }
            swap(&batch, &pending)
            isSleeping = false
            mutex.unlock()
            // Work that keeps queueing more work must not starve the socket or the deadline: look at both now
            // and then (a D-Bus call resumes its task with one batch, so this is rare).
            batchesInARow += 1
            if batchesInARow % 8 == 0 {
                if let wait = waitSet { waitForDescriptors(wait, timeout: 0, &descriptors, &events) }
                fireDeadline()
            }
            for work in batch {
                switch work {
                case .actorJob(let job, let serial): job.runSynchronously(on: serial)
                case .taskJob(let job, let task): job.runSynchronously(on: task)
                case .block(let block): block()
                }
            }
            batch.removeAll(keepingCapacity: true)
        }
    }

    /// The `epoll_wait` timeout for `deadline`: -1 without one, rounded up so the wait never ends early.
    private static func milliseconds(until deadline: Int64?) -> Int32 {
        guard let deadline else { return -1 }
        let left = deadline - now()
        guard left > 0 else { return 0 }
        // At most 1 s: epoll_wait counts on CLOCK_MONOTONIC, which stops during a suspend, and the deadline is
        // on CLOCK_BOOTTIME; re-reading the clock each second fires a timeout that fell due while suspended
        // within a second of resuming (only while a call is pending: without a deadline the wait is endless).
        return Int32(min((left + 999_999) / 1_000_000, 1_000))
    }

    /// Calls the handlers whose deadlines have come.
    private func fireDeadline() {
        guard let deadline else { return }
        let now = Self.now()
        guard now >= deadline else { return }
        if let due = libdbusDeadline, now >= due {
            setDeadline(nil, for: .libdbus)
            libdbusDeadlineHandler?()
        }
        if let due = callsDeadline, now >= due {
            setDeadline(nil, for: .calls)
            callsDeadlineHandler?()
        }
    }

    /// Waits for descriptors and runs their handlers; false when none was ready (the wait timed out).
    @discardableResult
    private func waitForDescriptors(
        _ wait: WaitSet, timeout: Int32, _ descriptors: inout [Int32], _ events: inout [UInt32]
    ) -> Bool {
        let count = clinux_epoll_wait(wait.epoll, &descriptors, &events, Int32(descriptors.count), timeout)
        if timeout != 0 {
            // Awake: work the handlers below queue (a reply resuming its task) must not write to `wakeup`.
            mutex.lock()
            isSleeping = false
            mutex.unlock()
        }
        guard count > 0 else { return false }  // EINTR, or nothing ready
        for index in 0..<Int(count) {
            let fd = descriptors[index]
            if fd == wait.wakeup {
                var value: UInt64 = 0
                _ = read(wait.wakeup, &value, MemoryLayout<UInt64>.size)
            } else if fd == timersDescriptor {
                timers.fire()
            } else {
                // A handler run earlier in this round may have removed this descriptor.
                handlers[fd]?(events[index])
            }
        }
        return true
    }
}
