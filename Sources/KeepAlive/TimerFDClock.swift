import Basics

/// A continuous clock (`CLOCK_BOOTTIME`, like `ContinuousClock` on Linux: it keeps counting through suspend)
/// whose sleeps wake the process exactly once, at their deadline.
///
/// Why: on Linux a cancelled `Task.sleep` keeps its libdispatch timer until the original deadline, which then
/// wakes a worker thread for nothing — and a poll cancels several (its window's deadline, its reply timeouts),
/// so a daemon ticking every 30 s woke ≈6 times a second between ticks (119 context switches in 20 s with 100
/// devices; 20 with this clock, all of them libdispatch's own 1 Hz worker-pool monitor). Here every sleep is an
/// entry on one thread blocked in `read(2)` on one `timerfd` armed (absolute) for the earliest deadline; a
/// cancelled sleep re-arms it for the next one, so nothing fires for a sleep nobody waits for.
///
/// ```swift
/// let keepAlive = KeepAlive(configuration: .init(interval: .seconds(30)), clock: TimerFDClock(), logger: logger)
/// ```
public struct TimerFDClock: Clock, Sendable {
    /// Time since boot, suspend included.
    public struct Instant: InstantProtocol, Sendable, CustomStringConvertible {
        public var sinceBoot: Duration

        public init(sinceBoot: Duration) {
            self.sinceBoot = sinceBoot
        }

        public func advanced(by duration: Duration) -> Instant {
            Instant(sinceBoot: sinceBoot + duration)
        }

        public func duration(to other: Instant) -> Duration {
            other.sinceBoot - sinceBoot
        }

        public static func < (lhs: Instant, rhs: Instant) -> Bool {
            lhs.sinceBoot < rhs.sinceBoot
        }

        public var description: String { "boot+\(sinceBoot.compact)" }
    }

    private let thread: TimerThread

    /// A clock on the process's one timer thread.
    public init() {
        thread = .shared
    }

    /// A clock on a timer thread of its own (which lives as long as the process): tests count its wakeups
    /// without the rest of the process adding to them.
    package static func isolated() -> TimerFDClock {
        TimerFDClock(thread: TimerThread())
    }

    private init(thread: TimerThread) {
        self.thread = thread
    }

    public var now: Instant {
        Instant(sinceBoot: TimerThread.now())
    }

    public var minimumResolution: Duration { .nanoseconds(1) }

    /// How many times this clock's timer thread has woken: one per distinct deadline reached (sleepers due
    /// together share one), none for cancelled sleeps. All `TimerFDClock()`s of a process share one thread
    /// (sleeps begun on a thread that hosts timers are not counted here: they wake their host).
    public var wakeups: UInt64 { thread.wakeups }

    /// The deadline the timer thread is armed for (nil: disarmed) and how many sleeps wait on it.
    package var armed: (deadline: Instant?, pending: Int) {
        let (deadline, pending) = thread.armed
        return (deadline.map(Instant.init(sinceBoot:)), pending)
    }

    /// Where a timer armed now goes: the calling thread's own timers when it hosts some (a D-Bus connection's
    /// thread does: what is armed there fires there, without waking the timer thread to hand it over), else
    /// the clock's timer thread. An isolated clock always uses its own.
    private var timers: TimerThread {
        guard thread === TimerThread.shared, let host = TimerThread.currentHost else { return thread }
        return host
    }

    /// Calls `action` at `deadline` (keep it short) on the timer thread, or on the calling thread when it hosts
    /// timers; what is returned cancels it.
    package func call(at deadline: Instant, _ action: @escaping @Sendable () -> Void) -> TimerCall {
        let timers = self.timers
        let id = timers.schedule(at: deadline.sinceBoot, action)
        return TimerCall { timers.cancel(id) }
    }

    /// Returns at `deadline` (at once when it has passed); throws `CancellationError` when the task is
    /// cancelled, at once. `tolerance` is not used: the one wakeup is at the deadline.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        guard deadline > now else { return }
        try await timers.sleep(until: deadline.sinceBoot)
    }
}
