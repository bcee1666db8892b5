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
        "t+\(offset.formattedSeconds)"
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
}

private protocol TimeSource: Sendable {
    var now: KeepAliveInstant { get }
    func sleep(until instant: KeepAliveInstant) async throws
}

private struct ClockTimeSource<C: Clock<Duration>>: TimeSource {
    let clock: C
    let origin: C.Instant

    var now: KeepAliveInstant {
        KeepAliveInstant(offset: origin.duration(to: clock.now))
    }

    func sleep(until instant: KeepAliveInstant) async throws {
        // No tolerance: deadlines are exact, and coalescing is the scheduler's decision, not the clock's.
        try await clock.sleep(until: origin.advanced(by: instant.offset), tolerance: nil)
    }
}

extension Duration {
    /// `1.5s`, `250ms`, `12µs`: short and unambiguous, for logs and descriptions.
    package var formattedSeconds: String {
        let (seconds, attoseconds) = components
        let totalMicros = seconds * 1_000_000 + attoseconds / 1_000_000_000_000
        if totalMicros % 1_000_000 == 0 { return "\(totalMicros / 1_000_000)s" }
        if abs(totalMicros) >= 1_000_000 {
            return "\(Double(totalMicros) / 1_000_000)s"
        }
        if totalMicros % 1_000 == 0 { return "\(totalMicros / 1_000)ms" }
        if abs(totalMicros) >= 1_000 { return "\(Double(totalMicros) / 1_000)ms" }
        return "\(totalMicros)µs"
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
