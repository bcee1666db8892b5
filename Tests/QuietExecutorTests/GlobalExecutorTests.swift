// The fence (see Sources/QuietExecutor/QuietExecutors.swift): without the SPI there is no pool to test.
#if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS

    @_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency
    import Basics
    import Testing

    @testable import QuietExecutor

    #if canImport(Glibc)
        import Glibc
    #endif

    /// The default executor's pool, an instance of its own in each test (this test process runs on the stock
    /// executors): tasks reach it through `Task(executorPreference:)`, delayed jobs through its scheduling API.
    @Suite struct GlobalExecutorTests {
        /// The bound between "did not wait for its deadline" and "did", or "lost": generous, because on a loaded
        /// 2-core machine running the whole suite a task that was due waited 4.5 s for a thread (a CI run). How
        /// accurate the sleeps are is measured by SleepBenchmark, not asserted here.
        static let promptly = Duration.seconds(20)

        /// Deadlines of these tests: a timerfd thread of their own, so that nothing else's deadlines mix in.
        static let timers = TimerThread()

        /// Catches: a fixed pool whose workers all block in a system call, leaving queued work to wait forever
        /// (libdispatch grows its pool then; this one must too).
        @Test func blockedWorkersDoNotStarveThePool() async throws {
            let pool = QuietGlobalExecutor(threads: 2, maxThreads: 8, timers: Self.timers)
            defer { pool.shutdown() }
            var ends: [Int32] = [-1, -1]
            try #require(pipe(&ends) == 0)
            let (readEnd, writeEnd) = (ends[0], ends[1])
            defer {
                close(readEnd)
                close(writeEnd)
            }
            let blockedCount = Locked(0)
            let blocked = (0..<pool.baseThreads).map { _ in
                Task(executorPreference: pool) { () -> Int in
                    blockedCount.withLock { $0 += 1 }
                    var byte: UInt8 = 0
                    return read(readEnd, &byte, 1)  // holds this worker until the test writes
                }
            }
            try await waitUntil("every worker is blocked in read") { blockedCount.withLock { $0 } == pool.baseThreads }

            let behind = Task(executorPreference: pool) { currentThreadName() }
            let thread = try await value(of: behind, "a job queued behind the blocked workers runs")
            #expect(thread.hasPrefix("ka-worker-"), "ran on \(thread)")
            #expect(pool.stats().starvationSpawns >= 1, "\(pool.stats())")

            let bytes = [UInt8](repeating: 1, count: pool.baseThreads)
            #expect(write(writeEnd, bytes, bytes.count) == bytes.count)
            for task in blocked { #expect(try await value(of: task, "a blocked worker's read returns") == 1) }
        }

        /// Catches: a pool that adds threads for work that is merely waiting for busy CPUs (oversubscription):
        /// workers that spin are runnable, so none is added however long the queue waits. Not under
        /// ThreadSanitizer: its runtime parks a spinning worker in its own locks (the spin reads a `Locked` flag),
        /// and a parked worker is what the pool's starvation check is for (CI's whole-suite run saw one added).
        @Test(.disabled(if: Sanitizers.thread, "ThreadSanitizer parks spinning workers in its own locks"))
        func busyWorkersOnACPUDoNotGrowThePool() async throws {
            let pool = QuietGlobalExecutor(threads: 2, maxThreads: 8, timers: Self.timers)
            defer { pool.shutdown() }
            let stop = Flag()
            let spinning = Locked(0)
            let spinners = (0..<pool.baseThreads).map { _ in
                Task(executorPreference: pool) {
                    spinning.withLock { $0 += 1 }
                    while !stop.isSet {}
                }
            }
            defer { stop.set() }
            try await waitUntil("every worker spins") { spinning.withLock { $0 } == pool.baseThreads }

            let looksBefore = pool.looksForStarvation
            let behind = Task(executorPreference: pool) { currentThreadName() }
            try await waitUntil("the pool has looked at the waiting job three times") {
                pool.looksForStarvation >= looksBefore + 3
            }
            #expect(pool.stats().starvationSpawns == 0, "\(pool.stats())")
            #expect(pool.stats().threads == pool.baseThreads)

            stop.set()
            for spinner in spinners { _ = try await value(of: spinner, "a spinning job ends") }
            _ = try await value(of: behind, "the job behind the spinning ones runs")
        }

        /// Catches: a delayed job that runs early, or very late (the bound is generous for a loaded two-core
        /// machine: this is about the mechanism, docs/EXECUTORS.md has the measured accuracy).
        @Test(arguments: ["continuous", "suspending"])
        func aDelayedJobRunsAfterItsDelay(clock: String) async throws {
            let pool = QuietGlobalExecutor(threads: 2, timers: Self.timers)
            defer { pool.shutdown() }
            let (scheduled, ran) = try await runFirstJob("the delayed job runs") { job in
                let now = ContinuousClock.now
                if clock == "continuous" {
                    pool.enqueue(ExecutorJob(job), after: .milliseconds(50), tolerance: nil, clock: ContinuousClock())
                } else {
                    pool.enqueue(ExecutorJob(job), after: .milliseconds(50), tolerance: nil, clock: SuspendingClock())
                }
                return now
            }
            let slept = scheduled.duration(to: ran.at)
            #expect(slept >= .milliseconds(50), "woke after \(slept)")
            #expect(slept < Self.promptly, "woke after \(slept)")
            #expect(ran.thread.hasPrefix("ka-worker-"), "ran on \(ran.thread)")
        }

        /// Catches: a `ContinuousClock` deadline put anywhere but on CLOCK_BOOTTIME (the clock that counts a
        /// suspend, as `ContinuousClock` does on Linux), and one that fires before its instant.
        @Test func continuousClockDeadlinesAreArmedOnBootTime() async throws {
            let timers = TimerThread()  // its own: the armed deadline below is this job's alone
            let pool = QuietGlobalExecutor(threads: 2, timers: timers)
            defer { pool.shutdown() }
            let (armed, ran) = try await runFirstJob("the job at its deadline runs") { job in
                let deadline = ContinuousClock.now + .milliseconds(200)
                let before = TimerThread.now()
                let leftBefore = ContinuousClock.now.duration(to: deadline)
                pool.enqueue(ExecutorJob(job), at: deadline, tolerance: nil, clock: ContinuousClock())
                let leftAfter = ContinuousClock.now.duration(to: deadline)
                let after = TimerThread.now()
                return (timers.armed.deadline, deadline, earliest: before + leftAfter, latest: after + leftBefore)
            }
            let (deadlineArmed, deadline, earliest, latest) = armed
            let boottime = try #require(deadlineArmed, "nothing armed on the timerfd")
            // Rounded up by the slack at most; a millisecond of margin for the reads around the call.
            let slack = Duration.nanoseconds(QuietGlobalExecutor.slackNanoseconds)
            #expect(boottime >= earliest - .milliseconds(1), "armed \(boottime), expected ≥ \(earliest)")
            #expect(boottime <= latest + slack + .milliseconds(1), "armed \(boottime), expected ≤ \(latest)")
            #expect(ran.at >= deadline, "ran \(ran.at.duration(to: deadline)) before its deadline")
            #expect(pool.stats().timers == 0)
        }

        /// Catches: a `Task.sleep(until:)` on `ContinuousClock` armed at another deadline than its boottime one.
        /// (An hour ahead, so that it is looked at before it ends however loaded the machine is — at 30 s, the whole
        /// suite's start on two CI cores let it end first — and cancelled then: the other sleep tests see sleeps
        /// end.)
        @Test func continuousClockSleepsAreArmedAtTheirBootTimeDeadline() async throws {
            let timers = TimerThread()
            let pool = QuietGlobalExecutor(threads: 2, timers: timers)
            defer { pool.shutdown() }
            let deadline = ContinuousClock.now + .seconds(3600)
            let bootDeadline = TimerThread.now() + ContinuousClock.now.duration(to: deadline)
            let sleeper = Task(executorPreference: pool) { () -> Bool in
                do { try await Task.sleep(until: deadline, clock: .continuous) } catch { return true }
                return false
            }
            // Nothing else on this timerfd: the armed deadline is the sleep's.
            try await waitUntil("the sleep is armed") { pool.stats().timers == 1 && timers.armed.pending == 1 }
            let armed = try #require(timers.armed.deadline, "nothing armed on the timerfd")
            let slack = Duration.nanoseconds(QuietGlobalExecutor.slackNanoseconds)
            #expect(armed >= bootDeadline - .milliseconds(5), "armed \(armed), boottime deadline \(bootDeadline)")
            #expect(
                armed <= bootDeadline + slack + .milliseconds(5), "armed \(armed), boottime deadline \(bootDeadline)")
            sleeper.cancel()
            #expect(try await value(of: sleeper, "the cancelled sleep ends"), "the sleep was not cancelled")
        }

        /// Catches: a deadline already past waiting for the timer thread (or never running).
        @Test func aPastDeadlineRunsAtOnce() async throws {
            let timers = TimerThread()
            let pool = QuietGlobalExecutor(threads: 2, timers: timers)
            defer { pool.shutdown() }
            let past = ContinuousClock.now - .seconds(1)
            let (pendingThen, _) = try await runFirstJob("the job of a past deadline runs") { job in
                pool.enqueue(ExecutorJob(job), at: past, tolerance: nil, clock: ContinuousClock())
                return pool.stats().timers
            }
            #expect(pendingThen == 0, "the job waited for a deadline")
        }

        /// Catches: `Task.sleep` of a task on the pool that wakes early, very late, or elsewhere. (With a preferred
        /// executor that schedules, Swift 6.3 puts the task's sleeps on that executor: these are the pool's.)
        @Test(arguments: ["continuous", "suspending"])
        func aTaskSleepOnThePoolWakesAfterItsDelay(clock: String) async throws {
            let timers = TimerThread()
            let pool = QuietGlobalExecutor(threads: 2, timers: timers)
            defer { pool.shutdown() }
            let sleeper = Task(executorPreference: pool) { () -> (slept: Duration, thread: String)? in
                let start = ContinuousClock.now
                do {
                    if clock == "continuous" {
                        try await Task.sleep(for: .milliseconds(50), clock: .continuous)
                    } else {
                        try await Task.sleep(for: .milliseconds(50), clock: .suspending)
                    }
                } catch {
                    return nil
                }
                return (start.duration(to: .now), currentThreadName())
            }
            let outcome = try await value(of: sleeper, "the sleep ends")
            let (slept, thread) = try #require(outcome, "the sleep threw")
            #expect(slept >= .milliseconds(50), "woke after \(slept)")
            #expect(slept < Self.promptly, "woke after \(slept)")
            #expect(thread.hasPrefix("ka-worker-"), "resumed on \(thread)")
            #expect(timers.wakeups >= 1, "the sleep did not wait on the pool's timerfd")
        }

        /// Catches: a cancelled sleep of a task on the pool that waits for its deadline instead of resuming at
        /// once, on the pool. Its wake-up job stays on the timerfd until the deadline (as with libdispatch).
        @Test func aCancelledSleepReturnsPromptly() async throws {
            let timers = TimerThread()
            let pool = QuietGlobalExecutor(threads: 2, timers: timers)
            defer { pool.shutdown() }
            let sleeper = Task(executorPreference: pool) { () -> (cancelled: Bool, thread: String) in
                do {
                    try await Task.sleep(for: .seconds(60))
                    return (false, currentThreadName())
                } catch {
                    return (error is CancellationError, currentThreadName())
                }
            }
            try await waitUntil("the task sleeps on the pool's timerfd") { pool.stats().timers == 1 }
            let cancelledAt = ContinuousClock.now
            sleeper.cancel()
            let outcome = try await value(of: sleeper, "the cancelled sleep returns", timeout: .seconds(30))
            #expect(outcome.cancelled)
            #expect(cancelledAt.duration(to: .now) < Self.promptly, "a 60-s sleep, cancelled")
            #expect(outcome.thread.hasPrefix("ka-worker-"), "resumed on \(outcome.thread)")
        }

        /// Catches: a delayed job that holds a worker, or the queue, while it waits.
        @Test func aPendingDelayedJobHoldsNoWorker() async throws {
            let pool = QuietGlobalExecutor(threads: 2, timers: Self.timers)
            defer { pool.shutdown() }
            let catcher = JobCatcher()
            let far = Task(executorPreference: catcher) { 0 }
            pool.enqueue(
                ExecutorJob(try await catcher.take()), after: .seconds(3600), tolerance: nil, clock: .continuous)
            #expect(pool.stats().timers == 1)
            let now = Task(executorPreference: pool) { 1 }
            #expect(try await value(of: now, "a job runs while a delayed one is pending") == 1)
            #expect(pool.stats().timers == 1 && pool.stats().queued == 0)
            far.cancel()  // its job stays pending on the timerfd until its deadline: it never runs in this process
        }

        /// Catches: a fatal error, or a job lost, for a clock whose durations are not `Duration` (the executor
        /// cannot time it; it runs the job at once and says so on standard error).
        @Test func aJobOfAnUnknownClockRunsAtOnce() async throws {
            let pool = QuietGlobalExecutor(threads: 2, timers: Self.timers)
            defer { pool.shutdown() }
            let (scheduled, ran) = try await runFirstJob("the job of an unknown clock runs") { job in
                let now = ContinuousClock.now
                pool.enqueue(ExecutorJob(job), after: Ticks(count: 1_000_000), tolerance: nil, clock: TickClock())
                return now
            }
            #expect(scheduled.duration(to: ran.at) < Self.promptly)
            let (scheduledAt, ranAt) = try await runFirstJob("the job of an unknown clock's instant runs") { job in
                let now = ContinuousClock.now
                let clock = TickClock()
                let instant = clock.now.advanced(by: Ticks(count: 1_000_000))
                pool.enqueue(ExecutorJob(job), at: instant, tolerance: nil, clock: clock)
                return now
            }
            #expect(scheduledAt.duration(to: ranAt.at) < Self.promptly)
        }

        /// Catches: a pool that runs queued jobs in another order than they came (first in, first out is the
        /// contract; one worker takes them all here, so the order it runs them in is the queue's).
        @Test func queuedJobsRunInTheOrderTheyCame() async throws {
            let pool = QuietGlobalExecutor(threads: 2, maxThreads: 2, timers: Self.timers)
            defer { pool.shutdown() }
            let order = Locked([Int]())
            // Held by blocking, not spinning: two spinning workers took both cores of a two-core machine for as
            // long as this test ran, and under ThreadSanitizer the whole suite beside it finished nothing for a
            // minute. `maxThreads: 2` keeps the pool from adding a worker for the blocked ones.
            let (releaseFirst, releaseSecond) = (BlockingGate(), BlockingGate())
            let first = Task(executorPreference: pool) { releaseFirst.wait() }
            let second = Task(executorPreference: pool) { releaseSecond.wait() }
            defer {
                releaseFirst.open()
                releaseSecond.open()
            }
            try await waitUntil("both workers are held") { pool.stats().idle == 0 && pool.stats().queued == 0 }
            var tasks: [Task<Void, Never>] = []
            for index in 0..<10 {
                tasks.append(Task(executorPreference: pool) { order.withLock { $0.append(index) } })
            }
            try await waitUntil("the ten jobs are queued") { pool.stats().queued == 10 }
            releaseFirst.open()
            for task in tasks { _ = try await value(of: task, "the queued jobs run") }
            #expect(order.withLock { $0 } == Array(0..<10))
            releaseSecond.open()
            _ = try await value(of: first, "the first held job ends")
            _ = try await value(of: second, "the second held job ends")
        }
    }

    /// A clock that counts in `Ticks`, not `Duration`: the executor has no way to time it.
    struct TickClock: Clock {
        struct Instant: InstantProtocol {
            var tick: Int64
            func advanced(by duration: Ticks) -> Instant { Instant(tick: tick + duration.count) }
            func duration(to other: Instant) -> Ticks { Ticks(count: other.tick - tick) }
            static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.tick < rhs.tick }
        }
        var now: Instant { Instant(tick: 0) }
        var minimumResolution: Ticks { Ticks(count: 1) }
        func sleep(until deadline: Instant, tolerance: Ticks?) async throws {}
    }

    struct Ticks: DurationProtocol, Hashable {
        var count: Int64
        static var zero: Ticks { Ticks(count: 0) }
        static func + (lhs: Ticks, rhs: Ticks) -> Ticks { Ticks(count: lhs.count + rhs.count) }
        static func - (lhs: Ticks, rhs: Ticks) -> Ticks { Ticks(count: lhs.count - rhs.count) }
        static func / (lhs: Ticks, rhs: Int) -> Ticks { Ticks(count: lhs.count / Int64(rhs)) }
        static func * (lhs: Ticks, rhs: Int) -> Ticks { Ticks(count: lhs.count * Int64(rhs)) }
        static func / (lhs: Ticks, rhs: Ticks) -> Double { Double(lhs.count) / Double(rhs.count) }
        static func < (lhs: Ticks, rhs: Ticks) -> Bool { lhs.count < rhs.count }
    }

#endif
