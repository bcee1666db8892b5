public import KeepAlive

/// Decides whether the daemon may tell systemd it is alive (`WATCHDOG=1`): only while the scheduler keeps its
/// promises, that is, while every tick fires and every window ends (whatever its result) within `tolerance`
/// of when it was due. A pure value: fed ``KeepAlive/Liveness`` snapshots, it never reads a clock itself.
///
/// An idle scheduler is alive (a 30-min interval owes nothing for 30 min); a paused one too (nothing is owed).
/// A wedged one (its tasks blocked, its lock held, the output stuck) falls behind: the earliest thing it owes
/// slips into the past, and once it is more than `tolerance` late the pings stop, so systemd's `WatchdogSec`
/// restarts the process.
///
/// ```swift
/// var watchdog = ProgressWatchdog(tolerance: .seconds(30))
/// let decision = watchdog.check(keepAlive.liveness)
/// if decision.ping { notifier.notify("WATCHDOG=1") }
/// ```
public struct ProgressWatchdog: Sendable, Hashable {
    /// What one check found, and whether it changed since the last one.
    public struct Decision: Sendable, Hashable {
        /// Send `WATCHDOG=1`.
        public var ping: Bool
        /// How late the scheduler is (zero when on time).
        public var lateness: Duration
        /// Set when the verdict flipped with this check: the first stalled check, or the first on time again.
        public var change: Change?
    }

    public enum Change: Sendable, Hashable {
        /// The scheduler fell more than the tolerance behind: pings stop from now on.
        case stalled
        /// It caught up again (pings resume; systemd restarts it first if it was late long enough).
        case recovered
    }

    /// How late the scheduler may be before the pings stop.
    public let tolerance: Duration
    /// Whether the last check found it stalled.
    public private(set) var isStalled = false
    /// When the last check ran (on the scheduler's clock).
    private var lastCheck: KeepAliveInstant?

    /// `tolerance` must be positive (a programmer's choice, not outside data).
    public init(tolerance: Duration) {
        precondition(tolerance > .zero, "a watchdog tolerance must be positive")
        self.tolerance = tolerance
    }

    /// The tolerance the daemon uses for a systemd ping interval (half of `WatchdogSec`): one ping interval, and
    /// at least 2 s, so that a tick fired a little late on a loaded machine never costs a restart, while a
    /// wedged daemon stops pinging within about one `WatchdogSec`.
    public static func tolerance(forPingInterval interval: Duration) -> Duration {
        max(interval, .seconds(2))
    }

    /// Judges one snapshot. Before `run()` (waiting for bluetoothd at start) and after it, nothing is owed.
    ///
    /// A check that comes much later than the one before (more than twice the tolerance) judges nothing: the
    /// watchdog itself was frozen with everything else (the host suspended, the process stopped), so the
    /// scheduler's lateness says nothing yet; it has until the next check to catch up.
    public mutating func check(_ liveness: KeepAlive.Liveness) -> Decision {
        defer { lastCheck = liveness.now }
        if let lastCheck, lastCheck.duration(to: liveness.now) > tolerance * 2 {
            return Decision(ping: !isStalled, lateness: liveness.lateness, change: nil)
        }
        let lateness = liveness.lateness
        let stalled = lateness > tolerance
        var change: Change?
        if stalled != isStalled { change = stalled ? .stalled : .recovered }
        isStalled = stalled
        return Decision(ping: !stalled, lateness: lateness, change: change)
    }
}
