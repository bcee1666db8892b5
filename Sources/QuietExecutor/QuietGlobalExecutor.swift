@_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// MARK: - the global (default) executor

/// The default executor: a pool of worker threads and one timer thread (docs/EXECUTORS.md).
// @unchecked Sendable: every mutable field is read and written under `mu`.
final class QuietGlobalExecutor: TaskExecutor, SchedulingExecutor, @unchecked Sendable {
    public let baseThreads: Int
    public let maxThreads: Int
    let starvationCheckNs: Int64 = 20_000_000  // 20 ms
    let surplusLingerNs: Int64 = 2_000_000_000  // 2 s
    static let bootWaitLimit: Int64 = 60_000_000_000  // 60 s

    private let mu = ExecutorMutex()
    private let workCond = ExecutorCondition()  // workers wait here
    private let timerCond = ExecutorCondition()  // timer/supervisor waits here
    private var queue = JobFIFO()
    private var monoHeap = TimerHeap()  // CLOCK_MONOTONIC deadlines
    private var bootHeap = TimerHeap()  // CLOCK_BOOTTIME deadlines
    private var seq: UInt64 = 0
    private var threads = 0
    private var idle = 0
    private var dequeued: UInt64 = 0
    private var supervisorWatching = false
    private var timerThreadStarted = false
    private var timerWaitDeadline: Int64 = .max  // what the timer thread currently sleeps until
    // statistics
    public private(set) var spawnedForStarvation = 0

    public init(threads: Int? = nil, maxThreads: Int = 64) {
        let cores = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        self.baseThreads = max(2, threads ?? cores)
        self.maxThreads = max(self.baseThreads, maxThreads)
    }

    private func startIfNeededLocked() {
        if timerThreadStarted { return }
        timerThreadStarted = true
        for _ in 0..<baseThreads { spawnWorkerLocked() }
        spawnExecutorThread(name: "ka-timer") { [self] in timerLoop() }
    }

    private var spawnedTotal = 0
    private var busyTIDs: [Int32: Bool] = [:]  // worker tid -> currently running a job

    /// A thread that could not be made is not counted (else base workers would take themselves for surplus ones
    /// and leave); the supervisor tries again at its next look while work waits.
    private func spawnWorkerLocked() {
        spawnedTotal += 1
        if spawnExecutorThread(name: "ka-worker-\(spawnedTotal)", { [self] in workerLoop() }) { threads += 1 }
    }

    /// Number of workers that are running a job AND are runnable (state R in /proc), i.e. not
    /// blocked in a syscall, futex, sleep... Only called while starved (at most every 20 ms).
    private func runnableBusyWorkersLocked() -> Int {
        var n = 0
        for (tid, busy) in busyTIDs where busy {
            if threadState(tid) == UInt8(ascii: "R") { n += 1 }
        }
        return n
    }

    // MARK: Executor

    public func enqueue(_ job: consuming ExecutorJob) {
        let j = UnownedJob(job)
        mu.lock()
        startIfNeededLocked()
        queue.push(j)
        let wakeWorker = idle > 0
        // More jobs than idle workers (an idle worker that was signalled still counts until it runs, so `idle > 0`
        // alone would leave a second job unwatched behind a first that blocks): the supervisor watches.
        var wakeSupervisor = false
        if queue.count > idle && !supervisorWatching && threads < maxThreads {
            supervisorWatching = true
            wakeSupervisor = true
        }
        mu.unlock()
        // Signalled after the unlock: a worker woken while the lock was still held blocked on it at once (a second
        // futex wait and wake per job, measured with strace -f -k). Nothing is lost: a worker counted in `idle`
        // under the lock is already inside its wait, which released the lock, so this signal reaches it.
        if wakeWorker { workCond.signal() }
        if wakeSupervisor { timerCond.signal() }
    }

    public func enqueue<C: Clock>(
        _ job: consuming ExecutorJob, at instant: C.Instant,
        tolerance: C.Duration?, clock: C
    ) {
        let j = UnownedJob(job)
        if let c = clock as? ContinuousClock {
            let inst = instant as! ContinuousClock.Instant
            let delay = saturatingNanoseconds(c.now.duration(to: inst))
            addTimer(j, delayNs: delay, boot: true)
        } else if let c = clock as? SuspendingClock {
            let inst = instant as! SuspendingClock.Instant
            addTimer(j, delayNs: saturatingNanoseconds(c.now.duration(to: inst)), boot: false)
        } else if let d = clock.now.duration(to: instant) as? Duration {
            addTimer(j, delayNs: saturatingNanoseconds(d), boot: false)
        } else {
            fatalError("QuietGlobalExecutor: unsupported clock \(C.self)")
        }
    }

    public func enqueue<C: Clock>(
        _ job: consuming ExecutorJob, after delay: C.Duration,
        tolerance: C.Duration?, clock: C
    ) {
        let j = UnownedJob(job)
        if clock is ContinuousClock {
            addTimer(j, delayNs: saturatingNanoseconds(delay as! Duration), boot: true)
        } else if let d = delay as? Duration {
            addTimer(j, delayNs: saturatingNanoseconds(d), boot: false)
        } else {
            fatalError("QuietGlobalExecutor: unsupported clock \(C.self)")
        }
    }

    private func addTimer(_ j: UnownedJob, delayNs: Int64, boot: Bool) {
        if delayNs <= 0 {
            enqueue(ExecutorJob(j))
            return
        }
        let now = nowNanoseconds(boot ? CLOCK_BOOTTIME : CLOCK_MONOTONIC)
        let deadline = delayNs > Int64.max / 2 - now ? Int64.max / 2 : now + delayNs
        mu.lock()
        startIfNeededLocked()
        seq &+= 1
        let e = TimerHeap.Entry(deadline: deadline, seq: seq, job: j)
        if boot { bootHeap.push(e) } else { monoHeap.push(e) }
        // Wake the timer thread only if this deadline is earlier than what it sleeps until.
        let monoTarget = boot ? nowNanoseconds(CLOCK_MONOTONIC) + (deadline - now) : deadline
        let wakeTimer = monoTarget < timerWaitDeadline
        mu.unlock()
        if wakeTimer { timerCond.signal() }  // after the unlock, as in enqueue(_:)
    }

    // MARK: threads

    private func workerLoop() {
        let tid = currentThreadID()
        mu.lock()
        var idleSince: Int64 = 0
        while true {
            if let j = queue.pop() {
                dequeued &+= 1
                busyTIDs[tid] = true
                mu.unlock()
                unsafe j.runSynchronously(on: genericExecutor)
                mu.lock()
                busyTIDs[tid] = false
                idleSince = 0
                continue
            }
            if threads > baseThreads {
                // Surplus thread (started because others were blocked): linger briefly, then exit.
                let now = nowNanoseconds(CLOCK_MONOTONIC)
                if idleSince == 0 { idleSince = now }
                if now - idleSince >= surplusLingerNs {
                    threads -= 1
                    busyTIDs[tid] = nil
                    break
                }
                idle += 1
                workCond.wait(mu, untilMono: idleSince + surplusLingerNs)
                idle -= 1
            } else {
                idle += 1
                workCond.wait(mu)  // no timeout: 0 wake-ups when idle
                idle -= 1
            }
        }
        mu.unlock()
    }

    private func timerLoop() {
        mu.lock()
        var lastDequeued: UInt64 = 0
        var checkAt: Int64 = .max
        while true {
            let nowMono = nowNanoseconds(CLOCK_MONOTONIC)
            let nowBoot = nowNanoseconds(CLOCK_BOOTTIME)
            var fired = 0
            while let d = monoHeap.minDeadline, d <= nowMono {
                queue.push(monoHeap.popMin().job)
                fired += 1
            }
            while let d = bootHeap.minDeadline, d <= nowBoot {
                queue.push(bootHeap.popMin().job)
                fired += 1
            }
            if fired > 0 {
                if fired == 1 { workCond.signal() } else { workCond.broadcast() }
            }

            var target: Int64 = .max
            if let d = monoHeap.minDeadline { target = d }
            // A CLOCK_BOOTTIME deadline is waited for on CLOCK_MONOTONIC, which stops while the system is suspended:
            // at most 60 s at a time, so a sleep that ended during a suspend fires within a minute of the resume.
            if let d = bootHeap.minDeadline { target = min(target, nowMono + min(d - nowBoot, Self.bootWaitLimit)) }

            // Starvation supervision: only while more jobs wait than idle workers can take.
            if queue.count > idle && threads < maxThreads {
                supervisorWatching = true
                if checkAt == .max || dequeued != lastDequeued {
                    lastDequeued = dequeued
                    checkAt = nowMono + starvationCheckNs
                } else if nowMono >= checkAt {
                    // No job started for starvationCheckNs although work is queued and nobody is idle.
                    // Add a thread only if fewer than baseThreads busy workers are actually on a CPU
                    // (the others are blocked), so CPU-bound jobs do not cause oversubscription.
                    if runnableBusyWorkersLocked() < baseThreads {
                        spawnedForStarvation += 1
                        spawnWorkerLocked()
                    }
                    lastDequeued = dequeued
                    checkAt = nowMono + starvationCheckNs
                }
                target = min(target, checkAt)
            } else {
                supervisorWatching = false
                checkAt = .max
            }

            timerWaitDeadline = target
            if target == .max { timerCond.wait(mu) } else { timerCond.wait(mu, untilMono: target) }
            timerWaitDeadline = .max
        }
    }

    /// Debug statistics.
    public func stats() -> (threads: Int, idle: Int, queued: Int, timers: Int, starvationSpawns: Int) {
        mu.lock()
        defer { mu.unlock() }
        return (threads, idle, queue.count, monoHeap.count + bootHeap.count, spawnedForStarvation)
    }
}
