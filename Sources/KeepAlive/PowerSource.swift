/// How much energy the host wants us to spend.
public enum PowerState: String, Sendable, Hashable, CaseIterable, Comparable {
    /// On mains, or nobody asked for restraint.
    case normal
    /// On battery or a power-saver profile: polling is stretched (by default ×2).
    case lowPower
    /// Battery critically low: polling pauses (or is stretched by a configured multiplier).
    case critical

    private var severity: Int {
        switch self {
        case .normal: 0
        case .lowPower: 1
        case .critical: 2
        }
    }

    public static func < (lhs: PowerState, rhs: PowerState) -> Bool {
        lhs.severity < rhs.severity
    }
}

/// Where the scheduler learns the host's power state: UPower, power-profiles-daemon, sysfs, a manual switch, or
/// a combination of them.
///
/// Contract for implementations:
/// - `state` is the current value, cheap to read (cached), never blocking;
/// - `updates()` returns a new stream for each caller; it yields every change after the call (not necessarily
///   the current value), in order, and finishes only when the source is gone for good;
/// - a source that loses its backend (a service leaving the bus) falls back to `.normal` and says so in a log
///   line rather than finishing the stream.
///
/// ```swift
/// struct AlwaysOnMains: PowerSource {
///     var state: PowerState { .normal }
///     func updates() -> AsyncStream<PowerState> { AsyncStream { _ in } }
/// }
/// ```
public protocol PowerSource: Sendable {
    var state: PowerState { get }
    func updates() -> AsyncStream<PowerState>
}

/// A power source that never changes: the default when nothing better is configured.
public struct FixedPowerSource: PowerSource {
    public let state: PowerState

    public init(_ state: PowerState = .normal) {
        self.state = state
    }

    public func updates() -> AsyncStream<PowerState> {
        // Never yields and never finishes: the observer simply waits until it is cancelled.
        AsyncStream { _ in }
    }
}

/// What the scheduler does in each power state.
public struct LowPowerPolicy: Sendable, Hashable {
    /// What `.critical` does.
    public enum Critical: Sendable, Hashable {
        /// Stop polling until the state improves.
        case pause
        /// Stretch the interval by this factor.
        case stretch(Double)
    }

    /// The factor `.lowPower` stretches the interval by (≥ 1).
    public var lowPowerMultiplier: Double
    public var critical: Critical

    public init(lowPowerMultiplier: Double = 2, critical: Critical = .pause) {
        self.lowPowerMultiplier = lowPowerMultiplier
        self.critical = critical
    }

    /// Both factors at least 1 (a low-power mode never polls more often) and finite.
    public func validate(field: String = "LowPowerPolicy") throws(ConfigurationValueError) {
        guard lowPowerMultiplier >= 1, lowPowerMultiplier.isFinite else {
            throw ConfigurationValueError(
                field: "\(field).lowPowerMultiplier",
                reason: "must be a finite number of at least 1, not \(lowPowerMultiplier)"
            )
        }
        if case .stretch(let factor) = critical, !(factor >= 1 && factor.isFinite) {
            throw ConfigurationValueError(
                field: "\(field).critical",
                reason: "the stretch factor must be a finite number of at least 1, not \(factor)"
            )
        }
    }

    /// The interval for `state`, or `nil` when polling pauses.
    public func effectiveInterval(_ interval: Duration, in state: PowerState) -> Duration? {
        switch state {
        case .normal:
            return interval
        case .lowPower:
            return interval * lowPowerMultiplier
        case .critical:
            switch critical {
            case .pause: return nil
            case .stretch(let factor): return interval * factor
            }
        }
    }
}
