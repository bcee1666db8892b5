/// A point on the monotonic time line that one scheduler, its ledger and its poll engine share.
///
/// Every component takes an `any Clock<Duration>` in its initialiser and measures time as an offset from the
/// moment it was created, so instants from a real `ContinuousClock` and from a manual test clock look the same
/// and compare exactly.
///
/// ```swift
/// let window: PollWindow = …
/// let late = window.began.duration(to: window.deadline)   // the budget
/// ```
public struct KeepAliveInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    /// Time since the origin of the clock this instant was read from.
    public var offset: Duration

    public init(offset: Duration) {
        self.offset = offset
    }

    public func advanced(by duration: Duration) -> KeepAliveInstant {
        KeepAliveInstant(offset: offset + duration)
    }

    public func duration(to other: KeepAliveInstant) -> Duration {
        other.offset - offset
    }

    public static func < (lhs: KeepAliveInstant, rhs: KeepAliveInstant) -> Bool {
        lhs.offset < rhs.offset
    }

    public static func + (lhs: KeepAliveInstant, rhs: Duration) -> KeepAliveInstant {
        lhs.advanced(by: rhs)
    }

    public static func - (lhs: KeepAliveInstant, rhs: KeepAliveInstant) -> Duration {
        rhs.duration(to: lhs)
    }

    public var description: String {
        "t+\(offset.compact)"
    }
}

/// The one place an `any Clock<Duration>` is opened: it fixes an origin and turns the clock's own instants
/// into ``KeepAliveInstant``s, so the rest of the core never juggles existential instants.
package struct TimeBase: Sendable {
    private let source: any TimeSource

    package init(_ clock: any Clock<Duration>) {
        source = Self.open(clock)
    }

    private static func open<C: Clock<Duration>>(_ clock: C) -> any TimeSource {
        ClockTimeSource(clock: clock, origin: clock.now)
    }

    package var now: KeepAliveInstant {
        source.now
    }

    /// Sleeps until `instant` on the underlying clock; throws `CancellationError` when cancelled.
    package func sleep(until instant: KeepAliveInstant) async throws {
        try await source.sleep(until: instant)
    }

    package func sleep(for duration: Duration) async throws {
        try await source.sleep(until: source.now.advanced(by: duration))
    }

    /// Calls `action` at `instant` on the clock's own timer thread, when the clock has one (``TimerFDClock``), and
    /// returns what cancels it; `nil` for any other clock, whose waits need a sleeping task. No task and no
    /// thread of the pool take part: the alarms of the scheduler and the ledger wake only who waits on them.
    package func call(at instant: KeepAliveInstant, _ action: @escaping @Sendable () -> Void) -> TimerCall? {
        source.call(at: instant, action)
    }

    /// True when ``call(at:_:)`` schedules its call (the clock is a ``TimerFDClock``), known before asking.
    package var hasTimerThread: Bool { source.hasTimerThread }
}

/// A call scheduled on a timer thread (``TimeBase/call(at:_:)``).
package struct TimerCall: Sendable {
    /// Forgets the call if it has not run; the timer thread is then not woken for it.
    package let cancel: @Sendable () -> Void
}

private protocol TimeSource: Sendable {
    var now: KeepAliveInstant { get }
    func sleep(until instant: KeepAliveInstant) async throws
    func call(at instant: KeepAliveInstant, _ action: @escaping @Sendable () -> Void) -> TimerCall?
    var hasTimerThread: Bool { get }
}

private struct ClockTimeSource<C: Clock<Duration>>: TimeSource {
    let clock: C
    let origin: C.Instant
    /// The clock and origin again when the clock is a ``TimerFDClock``: cast once here, not at every alarm's wait.
    private let timerFD: (clock: TimerFDClock, origin: TimerFDClock.Instant)?

    init(clock: C, origin: C.Instant) {
        self.clock = clock
        self.origin = origin
        if let clock = clock as? TimerFDClock, let origin = origin as? TimerFDClock.Instant {
            timerFD = (clock, origin)
        } else {
            timerFD = nil
        }
    }

    var now: KeepAliveInstant {
        KeepAliveInstant(offset: origin.duration(to: clock.now))
    }

    func sleep(until instant: KeepAliveInstant) async throws {
        // No tolerance: deadlines are exact, and coalescing is the scheduler's decision, not the clock's.
        try await clock.sleep(until: origin.advanced(by: instant.offset), tolerance: nil)
    }

    var hasTimerThread: Bool { timerFD != nil }

    func call(at instant: KeepAliveInstant, _ action: @escaping @Sendable () -> Void) -> TimerCall? {
        guard let timerFD else { return nil }
        return timerFD.clock.call(at: timerFD.origin.advanced(by: instant.offset), action)
    }
}

extension Duration {
    /// `2m`, `30s`, `3.33s`, `250ms`, `1.5ms`, `12µs`: the package's one way to write a duration for people (logs,
    /// messages, the terminal), in the configuration file's units so a value can be pasted back. Whole minutes
    /// and seconds exactly; otherwise at most two decimals, trailing zeros dropped.
    package var compact: String {
        let (seconds, attoseconds) = components
        let negative = seconds < 0 || attoseconds < 0
        let micros = abs(seconds * 1_000_000 + attoseconds / 1_000_000_000_000)
        let sign = negative && micros != 0 ? "-" : ""
        if micros >= 60_000_000, micros % 60_000_000 == 0 { return "\(sign)\(micros / 60_000_000)m" }
        if micros >= 1_000_000 || micros == 0 { return sign + Self.twoDecimals(micros, per: 1_000_000) + "s" }
        if micros >= 1_000 { return sign + Self.twoDecimals(micros, per: 1_000) + "ms" }
        return "\(sign)\(micros)µs"
    }

    /// `value / unit` rounded to two decimals, without trailing zeros: 3_333_333 per 1_000_000 → `3.33`.
    private static func twoDecimals(_ value: Int64, per unit: Int64) -> String {
        let hundredths = (value * 100 + unit / 2) / unit
        let whole = hundredths / 100
        let fraction = hundredths % 100
        if fraction == 0 { return "\(whole)" }
        if fraction % 10 == 0 { return "\(whole).\(fraction / 10)" }
        return "\(whole).\(fraction < 10 ? "0" : "")\(fraction)"
    }

    /// The duration in whole nanoseconds, saturating at Int64's range.
    package var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return seconds > 0 ? .max : .min }
        return product.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
    }

    /// The duration in milliseconds, rounded down.
    package var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000 + attoseconds / 1_000_000_000_000_000
    }

    package var secondsDouble: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
