import LocalServices
import TestHarness
import KeepAlive
import Basics
import Testing
@testable import DBus

extension DBusTests {
    /// The timers a connection's thread hosts (`ConnectionThread.timers`): a `TimerFDClock` sleep or call armed on
    /// the thread fires there, without the process's timer thread; a cancelled one disarms; what is still armed
    /// when the thread ends fires on the timer thread instead, and can still be cancelled.
    ///
    /// Each test counts the wakeups of its own thread's timers, which nothing else in the process uses.
    @Suite struct HostedTimers {
        /// Catches: a timer armed on the connection's thread sent to the timer thread (the hop the hosting
        /// removes), and one that fires early or elsewhere.
        @Test func aCallArmedOnTheThreadFiresOnItAtItsDeadline() async throws {
            let thread = try ConnectionThread(name: "test-timers")
            defer { thread.stop() }
            let clock = TimerFDClock()
            let (onThread, late) = try await bounded("the call fires") {
                await withCheckedContinuation { continuation in
                    thread.async {
                        let deadline = clock.now.advanced(by: .milliseconds(20))
                        _ = clock.call(at: deadline) {
                            continuation.resume(returning: (thread.isCurrent, deadline.duration(to: clock.now)))
                        }
                    }
                }
            }
            #expect(onThread, "the call ran off the connection's thread")
            #expect(late >= .zero, "fired \(late) early")
            #expect(thread.timers.wakeups == 1, "the thread's own timerfd woke it once")
            #expect(thread.timers.armed.deadline == nil && thread.timers.armed.pending == 0)
        }

        /// Catches: a task that prefers the connection's executor sleeping on the timer thread, and a sleep that
        /// resumes elsewhere.
        @Test func aSleepOfATaskPreferringTheThreadWakesOnlyTheThread() async throws {
            let thread = try ConnectionThread(name: "test-sleeps")
            defer { thread.stop() }
            let clock = TimerFDClock()
            let (slept, onThread) = try await bounded("three sleeps end") {
                try await withTaskExecutorPreference(thread.taskExecutor) {
                    let start = clock.now
                    for _ in 0..<3 { try await clock.sleep(for: .milliseconds(10)) }
                    return (start.duration(to: clock.now), thread.isCurrent)
                }
            }
            #expect(slept >= .milliseconds(30))
            #expect(onThread)
            #expect(thread.timers.wakeups == 3)
            #expect(thread.timers.armed.pending == 0)
        }

        /// Catches: a cancelled timer that still fires or keeps the timerfd armed (a wakeup between a daemon's
        /// ticks), and a cancelled sleep that waits for its deadline.
        @Test func cancelledTimersDisarmAndNeverFire() async throws {
            let thread = try ConnectionThread(name: "test-cancel")
            defer { thread.stop() }
            let clock = TimerFDClock()
            let fired = Locked(false)
            let call = try await bounded("the call is armed") {
                await withCheckedContinuation { continuation in
                    thread.async {
                        continuation.resume(
                            returning: clock.call(at: clock.now.advanced(by: .seconds(60))) {
                                fired.withLock { $0 = true }
                            })
                    }
                }
            }
            #expect(thread.timers.armed.pending == 1)
            // Cancelled from another thread than its host.
            call.cancel()
            #expect(thread.timers.armed.deadline == nil && thread.timers.armed.pending == 0)

            let sleeper = Task {
                try await withTaskExecutorPreference(thread.taskExecutor) { try await clock.sleep(for: .seconds(60)) }
            }
            try await waitUntil("the sleep is armed on the thread") { thread.timers.armed.pending == 1 }
            sleeper.cancel()
            let outcome = try await bounded("the cancelled sleep ends") { await sleeper.result }
            #expect(throws: CancellationError.self) { try outcome.get() }
            #expect(thread.timers.armed.deadline == nil && thread.timers.armed.pending == 0)
            #expect(thread.timers.wakeups == 0)
            #expect(!fired.withLock { $0 })
        }

        /// Catches: timers lost when their thread ends (a daemon's tick never coming after a reconnection), a
        /// timerfd left open by a closed connection, and a cancellation lost in the hand-over.
        @Test func timersArmedWhenTheThreadEndsFireOnTheTimerThreadAndCanStillBeCancelled() async throws {
            let thread = try ConnectionThread(name: "test-handover")
            let clock = TimerFDClock()
            let events = Locked<[String]>([])
            let hosted = thread.timers
            let (cancelled, sentinel) = try await bounded("the timers are armed") {
                await withCheckedContinuation { continuation in
                    thread.async {
                        // Margins wide enough for a loaded machine: the thread ends long before the sleep is due,
                        // the cancelled call is never due during the test, and the sentinel comes well after the
                        // sleep.
                        let now = TimerThread.now()
                        let cancelled = hosted.schedule(at: now + .seconds(60)) {
                            events.withLock { $0.append("cancelled") }
                        }
                        let sentinel = hosted.schedule(at: now + .milliseconds(1_500)) {
                            events.withLock { $0.append(thread.isCurrent ? "sentinel on the thread" : "sentinel") }
                        }
                        continuation.resume(returning: (cancelled, sentinel))
                    }
                }
            }
            let sleeper = Task {
                try await withTaskExecutorPreference(thread.taskExecutor) {
                    try await clock.sleep(for: .milliseconds(500))
                    events.withLock { $0.append("slept") }
                }
            }
            try await waitUntil("the sleep is armed on the thread") { hosted.armed.pending == 3 }
            let id = try await Threads.id(of: thread)
            thread.stop()
            try await waitUntil("the thread ends") { !Threads.exists(id) }
            #expect(hosted.armed.pending == 0, "everything was handed over")

            // Cancelled after the hand-over: found where it went.
            #expect(hosted.cancel(cancelled))
            try await bounded("the sleep ends") { try await sleeper.value }
            try await waitUntil("the sentinel fires") { events.withLock { $0.count } == 2 }
            #expect(events.withLock { $0 } == ["slept", "sentinel"])
            #expect(!hosted.cancel(sentinel), "it ran")
            #expect(hosted.wakeups == 0, "the ended thread's timerfd never fired")
        }
    }
}
