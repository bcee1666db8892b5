import KeepAlive
import Testing

/// TimerFDClock is a real clock: these tests check what it promises whatever the machine's load (never early;
/// armed for the earliest live deadline; cancelled sleeps disarm), and take little real time. Each uses a clock
/// with a timer thread of its own, so the wakeups it counts are its own.
@Suite("TimerFDClock: one wakeup per deadline")
struct TimerFDClockTests {
    @Test func aSleepEndsAtItsDeadlineNotBefore() async throws {
        let clock = TimerFDClock.isolated()
        let deadline = clock.now.advanced(by: .milliseconds(50))
        try await clock.sleep(until: deadline)
        let late = deadline.duration(to: clock.now)
        // How late depends on the machine's load (the whole suite runs in parallel on two cores): only "not
        // early" is the clock's promise; the benchmark measures lateness on a quiet machine.
        #expect(late >= .zero, "woke \(late) early")
        #expect(clock.wakeups <= 1)
        #expect(clock.armed.deadline == nil)
    }

    @Test func aPassedDeadlineReturnsAtOnceWithoutAWakeup() async throws {
        let clock = TimerFDClock.isolated()
        try await clock.sleep(until: clock.now.advanced(by: .milliseconds(-5)))
        try await clock.sleep(for: .zero)
        #expect(clock.wakeups == 0)
    }

    @Test func manySleepersWakeInDeadlineOrderNoneEarly() async throws {
        let clock = TimerFDClock.isolated()
        let start = clock.now
        var generator = SystemRandomNumberGenerator()
        let offsets = (0..<200).map { _ in Duration.milliseconds(Int64.random(in: 1...150, using: &generator)) }
        let woke = try await withThrowingTaskGroup(of: (Duration, Duration).self) { group in
            for offset in offsets {
                group.addTask {
                    try await clock.sleep(until: start.advanced(by: offset))
                    return (offset, start.duration(to: clock.now))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(woke.count == 200)
        for (offset, elapsed) in woke {
            #expect(elapsed >= offset, "a sleeper until +\(offset) woke at +\(elapsed)")
        }
        // Sleepers that fall due together share a wakeup: never more wakeups than distinct deadlines.
        #expect(clock.wakeups <= UInt64(Set(offsets).count))
    }

    @Test func aCancelledSleepThrowsAtOnceAndItsDeadlineNeverWakesTheThread() async throws {
        let clock = TimerFDClock.isolated()
        let start = clock.now
        let first = Task { try await clock.sleep(until: start.advanced(by: .seconds(60))) }
        try await waitUntil("the first sleep is registered") { clock.armed.pending == 1 }
        #expect(clock.armed.deadline == start.advanced(by: .seconds(60)))
        let second = Task { try await clock.sleep(until: start.advanced(by: .seconds(61))) }
        try await waitUntil("the second sleep is registered") { clock.armed.pending == 2 }
        #expect(clock.armed.deadline == start.advanced(by: .seconds(60)), "armed for the earliest")

        first.cancel()
        await #expect(throws: CancellationError.self) { try await first.value }
        // Re-armed for the next live deadline: the cancelled one's will wake nobody.
        #expect(clock.armed.deadline == start.advanced(by: .seconds(61)))
        #expect(clock.armed.pending == 1)

        second.cancel()
        await #expect(throws: CancellationError.self) { try await second.value }
        #expect(clock.armed.deadline == nil, "nothing left to wait for: disarmed")
        #expect(clock.wakeups == 0)
    }

    @Test func aTaskCancelledBeforeSleepingThrowsAtOnce() async {
        let clock = TimerFDClock.isolated()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(for: .seconds(60))
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(clock.wakeups == 0)
    }

    @Test func theSchedulerTicksOnIt() async throws {
        let clock = TimerFDClock.isolated()
        let keepAlive = try KeepAlive(
            configuration: .init(interval: .milliseconds(40)), clock: clock, logger: quietLogger)
        let (ticks, tick) = AsyncStream<Void>.makeStream()
        _ = try keepAlive.register(name: "tick") { _ in
            tick.yield()
            return .noData
        }
        try await withRunning(keepAlive) {
            var count = 0
            for await _ in ticks {
                count += 1
                if count == 4 { break }
            }
        }
        // The first tick is at start; each later one woke the thread once, or found its deadline passed
        // already on a loaded machine: never more wakeups than ticks. Plus one for each timer of a window (its
        // warning, two thirds into the budget, counted from half to be safe, and its deadline) that a window
        // outlived: that takes a machine loaded as much as by the whole suite at once, and the ledger must wake.
        let timersOutlived = keepAlive.ledger.history().reduce(0) { count, window in
            let used = window.began.duration(to: window.ended)
            return count + (used >= window.budget / 2 ? 1 : 0) + (used >= window.budget ? 1 : 0)
        }
        #expect(
            clock.wakeups <= 4 + UInt64(timersOutlived),
            """
                windows used \(keepAlive.ledger.history().map { $0.used.compact }) of \
                \(keepAlive.ledger.history().map { $0.budget.compact })
                """
        )
    }
}

/// The scheduler's and the ledger's `Alarm` on a TimerFDClock: its deadline is a call on the timer thread that
/// resumes the waiter directly (no task sleeps for it), and a ring takes that call back.
@Suite("Alarm on a TimerFDClock")
struct AlarmOnTimerFDClockTests {
    @Test func aWaitEndsAtItsDeadlineThroughOneTimerCall() async throws {
        let clock = TimerFDClock.isolated()
        let time = TimeBase(clock)
        let alarm = Alarm(time: time)
        // Far enough that the wait is registered before it even on a loaded machine (a deadline already passed
        // ends the wait without the timer thread).
        let deadline = time.now.advanced(by: .milliseconds(100))
        await alarm.wait(until: deadline)
        #expect(time.now >= deadline, "woke \(time.now.duration(to: deadline)) early")
        #expect(clock.wakeups == 1)
        #expect(clock.armed.pending == 0)
    }

    @Test func aRingEndsTheWaitAndItsDeadlineWakesNobody() async throws {
        let clock = TimerFDClock.isolated()
        let time = TimeBase(clock)
        let alarm = Alarm(time: time)
        let waiter = Task { await alarm.wait(until: time.now.advanced(by: .seconds(60))) }
        try await waitUntil("the alarm's timer call is scheduled") { clock.armed.pending == 1 }
        alarm.ring()
        await waiter.value
        #expect(clock.armed.pending == 0, "the ring took the call back")
        #expect(clock.armed.deadline == nil, "the timerfd is disarmed")
        #expect(clock.wakeups == 0)
    }
}
