// The fence (see QuietExecutors.swift): without the SPI this file is empty.
#if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS

    @_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency
    import Basics
    import Synchronization

    #if canImport(Glibc)
        import Glibc
    #elseif canImport(Musl)
        import Musl
    #endif

    // MARK: - the global (default) executor

    /// The default executor: a pool of worker threads that wait without a timeout; its delayed jobs and its watch
    /// for blocked workers are deadlines on the process's timerfd thread (docs/EXECUTORS.md).
    // @unchecked Sendable: every mutable field is read and written under `mu` (`pendingTimers` is atomic).
    final class QuietGlobalExecutor: TaskExecutor, SchedulingExecutor, @unchecked Sendable {
        let baseThreads: Int
        let maxThreads: Int
        /// How long work may wait, with no idle worker and no job started, before a worker is added.
        static let starvationCheck: Duration = .milliseconds(20)
        let surplusLingerNs: Int64 = 2_000_000_000  // 2 s
        /// Longer delays wait this long, about 146 years (a deadline must fit the timerfd's nanoseconds).
        static let longestDelay: Duration = .nanoseconds(Int64.max / 2)
        /// With more delayed jobs than this pending, deadlines are rounded up to a multiple of ``slackNanoseconds``
        /// so that those close together share one wake-up and one re-arm of the timerfd (which, unlike a thread's
        /// timed wait, gets no timer slack from the kernel); with fewer, each fires on time. Many tasks sleeping at
        /// once then cost about as much CPU a sleep as on the timer thread these replaced (docs/EXECUTORS.md,
        /// "Measured"), and the daemon's few sleeps are not delayed.
        static let crowdedTimers = 16
        static let slackNanoseconds: Int64 = 100_000

        private let mu = PthreadMutex()
        private let workCond = PthreadCondition()  // workers wait here
        private var queue = JobFIFO()
        private var threads = 0
        private var idle = 0
        private var starting = 0  // workers made that have not yet taken the lock: about to take work, as idle ones
        private var dequeued: UInt64 = 0
        private var started = false
        private var stopping = false
        /// A look for starved work is armed on the timer thread; `dequeuedAtLastLook` is the progress it compares.
        private var supervisorWatching = false
        private var dequeuedAtLastLook: UInt64 = 0
        private var spawnedTotal = 0
        private var spawnedForStarvation = 0
        private var starvationLooks = 0
        private var busyTIDs: [Int32: Bool] = [:]  // worker tid -> currently running a job
        private let pendingTimers = Atomic<Int>(0)
        private let ownTimers: TimerThread?

        /// The process's timerfd thread, made (if nothing made it before) with the executors' signal mask.
        private static let sharedTimers: TimerThread = withExecutorSignalMask { TimerThread.shared }

        /// Delayed jobs' deadlines: the process's timerfd thread, or `timers` (tests count their own wake-ups).
        private var timers: TimerThread { ownTimers ?? Self.sharedTimers }

        /// - Parameters:
        ///   - threads: the workers that wait for work (default: as many as cores, at least 2).
        ///   - maxThreads: at most this many with the ones added while the others were blocked.
        ///   - timers: where deadlines wait (default: `TimerThread.shared`).
        init(threads: Int? = nil, maxThreads: Int = 64, timers: TimerThread? = nil) {
            let cores = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
            self.baseThreads = max(2, threads ?? cores)
            self.maxThreads = max(self.baseThreads, maxThreads)
            self.ownTimers = timers
        }

        /// Runs once no worker and no armed deadline holds the executor any more (each holds it strongly).
        deinit {
            workCond.destroy()
            mu.destroy()
        }

        private func startIfNeededLocked() {
            if started { return }
            started = true
            for _ in 0..<baseThreads { spawnWorkerLocked() }
        }

        /// A thread that could not be made is not counted (else base workers would take themselves for surplus
        /// ones and leave); the next look for starved work tries again while work waits.
        private func spawnWorkerLocked() {
            spawnedTotal += 1
            if spawnExecutorThread(name: "ka-worker-\(spawnedTotal)", { [self] in workerLoop() }) {
                threads += 1
                starting += 1
            }
        }

        /// Number of workers that are running a job AND are runnable (state R in /proc), i.e. not blocked in a
        /// syscall, futex, sleep... Only called while work waits with no idle worker (at most every 20 ms).
        private func runnableBusyWorkersLocked() -> Int {
            var n = 0
            for (tid, busy) in busyTIDs where busy {
                if threadState(tid) == UInt8(ascii: "R") { n += 1 }
            }
            return n
        }

        // MARK: Executor

        func enqueue(_ job: consuming ExecutorJob) {
            push(UnownedJob(job))
        }

        private func push(_ j: UnownedJob) {
            mu.lock()
            startIfNeededLocked()
            queue.push(j)
            let wakeWorker = idle > 0
            // More jobs than idle workers (an idle worker that was signalled still counts until it runs, so
            // `idle > 0` alone would leave a second job unwatched behind a first that blocks): watch for starvation.
            var watch = false
            if queue.count > idle + starting && !supervisorWatching && threads < maxThreads && !stopping {
                supervisorWatching = true
                dequeuedAtLastLook = dequeued
                watch = true
            }
            mu.unlock()
            // Signalled after the unlock: a worker woken while the lock was still held blocked on it at once (a
            // second futex wait and wake per job, measured with strace -f -k). Nothing is lost: a worker counted in
            // `idle` under the lock is already inside its wait, which released the lock, so this signal reaches it.
            if wakeWorker { workCond.signal() }
            if watch { scheduleStarvationLook() }
        }

        // MARK: SchedulingExecutor

        func enqueue<C: Clock>(
            _ job: consuming ExecutorJob, at instant: C.Instant,
            tolerance: C.Duration?, clock: C
        ) {
            let j = UnownedJob(job)
            // The clock's own `now` gives the delay, whatever epoch its instants count from.
            guard let delay = clock.now.duration(to: instant) as? Duration else {
                return runAtOnce(j, unknownClock: C.self)
            }
            schedule(j, after: delay, suspending: clock is SuspendingClock)
        }

        func enqueue<C: Clock>(
            _ job: consuming ExecutorJob, after delay: C.Duration,
            tolerance: C.Duration?, clock: C
        ) {
            let j = UnownedJob(job)
            guard let delay = delay as? Duration else { return runAtOnce(j, unknownClock: C.self) }
            schedule(j, after: delay, suspending: clock is SuspendingClock)
        }

        /// `job` after `delay`: on `ContinuousClock` (and any other clock measured in `Duration`, timed as elapsed
        /// time) a deadline on the timerfd's CLOCK_BOOTTIME, which counts a suspend, so a sleep that ended while
        /// the system was suspended runs at the resume; on `SuspendingClock`, see ``wake(_:whenMonotonicReaches:)``.
        private func schedule(_ job: UnownedJob, after delay: Duration, suspending: Bool) {
            guard delay > .zero else { return push(job) }
            let delay = min(delay, Self.longestDelay)
            let crowded = pendingTimers.add(1, ordering: .relaxed).newValue > Self.crowdedTimers
            if suspending {
                wake(job, whenMonotonicReaches: monotonicNow() + delay, crowded: crowded)
            } else {
                _ = timers.schedule(at: Self.slackened(TimerThread.now() + delay, crowded)) { [self] in
                    pendingTimers.subtract(1, ordering: .relaxed)
                    push(job)
                }
            }
        }

        /// A `SuspendingClock` deadline is on CLOCK_MONOTONIC, which stops while the system is suspended; the
        /// timerfd counts on CLOCK_BOOTTIME, which does not. Armed for the monotonic time left it never fires late;
        /// if a suspend made it fire early, it is armed again for what is left.
        private func wake(_ job: UnownedJob, whenMonotonicReaches deadline: Duration, crowded: Bool) {
            let left = deadline - monotonicNow()
            guard left > .zero else {
                pendingTimers.subtract(1, ordering: .relaxed)
                return push(job)
            }
            _ = timers.schedule(at: Self.slackened(TimerThread.now() + left, crowded)) { [self] in
                wake(job, whenMonotonicReaches: deadline, crowded: crowded)
            }
        }

        /// `deadline`, rounded up to a multiple of ``slackNanoseconds`` when `crowded`.
        static func slackened(_ deadline: Duration, _ crowded: Bool) -> Duration {
            guard crowded else { return deadline }
            let (seconds, attoseconds) = deadline.components
            let nanoseconds = attoseconds / 1_000_000_000
            let rounded = (nanoseconds + slackNanoseconds - 1) / slackNanoseconds * slackNanoseconds
            return .seconds(seconds) + .nanoseconds(rounded)
        }

        /// A clock whose durations are not `Duration` cannot be put on the timerfd: its job runs now (once noted
        /// on standard error) rather than never. The standard library schedules only `ContinuousClock` and
        /// `SuspendingClock` jobs; this takes a custom clock that asks the executor itself.
        private func runAtOnce<C: Clock>(_ job: UnownedJob, unknownClock: C.Type) {
            if !Self.notedUnknownClock.exchange(true, ordering: .relaxed) {
                let note = "QuietExecutor: \(C.self) does not measure in Duration; its delayed jobs run at once\n"
                _ = note.withCString { write(2, $0, strlen($0)) }
            }
            push(job)
        }

        private static let notedUnknownClock = Atomic<Bool>(false)

        // MARK: starvation

        private func scheduleStarvationLook() {
            _ = timers.schedule(at: TimerThread.now() + Self.starvationCheck) { [self] in lookForStarvation() }
        }

        /// On the timer thread, 20 ms after work began to wait with no idle worker, and every 20 ms while it still
        /// does: when no job started in that time and fewer than the pool's size of busy workers are on a CPU (the
        /// others are blocked), adds a worker. CPU-bound jobs never grow the pool.
        private func lookForStarvation() {
            mu.lock()
            starvationLooks += 1
            guard queue.count > idle + starting && threads < maxThreads && !stopping else {
                supervisorWatching = false
                mu.unlock()
                return
            }
            if dequeued == dequeuedAtLastLook && runnableBusyWorkersLocked() < baseThreads {
                spawnedForStarvation += 1
                spawnWorkerLocked()
            }
            dequeuedAtLastLook = dequeued
            mu.unlock()
            scheduleStarvationLook()
        }

        // MARK: threads

        private func workerLoop() {
            let tid = currentThreadID()
            mu.lock()
            starting -= 1
            var idleSince: Int64 = 0
            while true {
                if let j = queue.pop() {
                    dequeued &+= 1
                    busyTIDs[tid] = true
                    mu.unlock()
                    runOnGenericExecutor(j)
                    mu.lock()
                    busyTIDs[tid] = false
                    idleSince = 0
                    continue
                }
                if stopping {
                    threads -= 1
                    busyTIDs[tid] = nil
                    break
                }
                if threads > baseThreads {
                    // Surplus thread (started because others were blocked): linger briefly, then exit.
                    let now = clockNanoseconds(CLOCK_MONOTONIC)
                    if idleSince == 0 { idleSince = now }
                    if now - idleSince >= surplusLingerNs {
                        threads -= 1
                        busyTIDs[tid] = nil
                        break
                    }
                    idle += 1
                    workCond.wait(mu, untilMonotonic: idleSince + surplusLingerNs)
                    idle -= 1
                } else {
                    idle += 1
                    workCond.wait(mu)  // no timeout: 0 wake-ups when idle
                    idle -= 1
                }
            }
            mu.unlock()
        }

        /// Lets every worker end once the queue is empty (an instance made for a test; the process's own pool
        /// lives as long as the process). Delayed jobs still pending then are pushed and run by no one.
        func shutdown() {
            mu.lock()
            stopping = true
            mu.unlock()
            workCond.broadcast()
        }

        /// How many jobs the workers have taken.
        var jobsRun: UInt64 {
            mu.lock()
            defer { mu.unlock() }
            return dequeued
        }

        /// How many times the pool has looked for starved work (tests wait for looks, not for time).
        var looksForStarvation: Int {
            mu.lock()
            defer { mu.unlock() }
            return starvationLooks
        }

        /// The pool's figures now.
        func stats() -> (threads: Int, idle: Int, queued: Int, timers: Int, starvationSpawns: Int) {
            mu.lock()
            defer { mu.unlock() }
            return (threads, idle, queue.count, pendingTimers.load(ordering: .relaxed), spawnedForStarvation)
        }
    }

    /// CLOCK_MONOTONIC now (what `SuspendingClock` reads on Linux).
    func monotonicNow() -> Duration {
        .nanoseconds(clockNanoseconds(CLOCK_MONOTONIC))
    }

#endif
