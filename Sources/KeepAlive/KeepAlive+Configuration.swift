extension KeepAlive {
    /// How the scheduler ticks.
    ///
    /// ```swift
    /// var configuration = KeepAlive.Configuration(interval: .seconds(60))
    /// configuration.jitter = .seconds(2)
    /// configuration.lowPower = LowPowerPolicy(lowPowerMultiplier: 3, critical: .stretch(10))
    /// ```
    public struct Configuration: Sendable {
        /// Time between ticks on mains power (default 30 s).
        public var interval: Duration
        /// Budget of each callback's window; `nil` means the smaller of 20 s and two thirds of the interval.
        /// Must be shorter than the interval, so a tick's windows close before the next tick.
        public var windowBudget: Duration?
        /// Each deadline is delayed by a random amount in `0...jitter`; it never accumulates (default none).
        public var jitter: Duration
        /// How `.lowPower` and `.critical` stretch or pause the interval.
        public var lowPower: LowPowerPolicy
        /// After `n` consecutive failures a registration waits `interval × min(2^(n-1), this)` from the failing
        /// tick before it runs again; a success resets it.
        public var maxFailureBackoffMultiplier: Int
        /// The ledger's grace, warning lead and history size.
        public var ledger: BackgroundTaskLedger.Configuration

        public init(
            interval: Duration = .seconds(30),
            windowBudget: Duration? = nil,
            jitter: Duration = .zero,
            lowPower: LowPowerPolicy = LowPowerPolicy(),
            maxFailureBackoffMultiplier: Int = 16,
            ledger: BackgroundTaskLedger.Configuration = BackgroundTaskLedger.Configuration()
        ) {
            self.interval = interval
            self.windowBudget = windowBudget
            self.jitter = jitter
            self.lowPower = lowPower
            self.maxFailureBackoffMultiplier = maxFailureBackoffMultiplier
            self.ledger = ledger
        }

        /// The budget a window gets for a registration ticking every `interval`.
        public func budget(forInterval interval: Duration) -> Duration {
            windowBudget ?? min(.seconds(20), interval * 2 / 3)
        }

        /// Checks every value: the interval and budget positive, the budget shorter than the interval, the
        /// jitter not negative and shorter than the interval, the back-off multiplier at least 1, and the low-power
        /// policy and the ledger's settings (see their own `validate()`).
        public func validate() throws(ConfigurationValueError) {
            let field = "KeepAlive.Configuration"
            guard interval > .zero else {
                throw ConfigurationValueError(
                    field: "\(field).interval", reason: "must be positive, not \(interval.compact)")
            }
            guard jitter >= .zero, jitter < interval else {
                throw ConfigurationValueError(
                    field: "\(field).jitter",
                    reason:
                        "must be at least 0 and shorter than the interval (\(interval.compact)), not \(jitter.compact)"
                )
            }
            guard maxFailureBackoffMultiplier >= 1 else {
                throw ConfigurationValueError(
                    field: "\(field).maxFailureBackoffMultiplier",
                    reason: "must be at least 1, not \(maxFailureBackoffMultiplier)"
                )
            }
            if let windowBudget {
                try Self.validate(budget: windowBudget, interval: interval, field: "\(field).windowBudget")
            }
            try lowPower.validate(field: "\(field).lowPower")
            try ledger.validate(field: "\(field).ledger")
        }

        /// A window budget must be positive and shorter than its interval, so a tick's windows close before the
        /// next tick.
        static func validate(budget: Duration, interval: Duration, field: String) throws(ConfigurationValueError) {
            guard budget > .zero else {
                throw ConfigurationValueError(field: field, reason: "must be positive, not \(budget.compact)")
            }
            guard budget < interval else {
                throw ConfigurationValueError(
                    field: field,
                    reason: "\(budget.compact) must be shorter than the interval (\(interval.compact))"
                )
            }
        }
    }

    /// Per-registration settings.
    public struct RegistrationOptions: Sendable {
        /// This registration's own interval (before power stretching); `nil` uses the scheduler's.
        public var interval: Duration?
        /// This registration's window budget; `nil` derives it from the interval.
        public var budget: Duration?
        /// Fire at most this many ticks, then stay registered but quiet (`nil`: no limit). For "poll N rounds
        /// and exit" (`keepalive run --ticks N`) and hardware-in-the-loop runs.
        public var maxTicks: UInt64?

        public init(interval: Duration? = nil, budget: Duration? = nil, maxTicks: UInt64? = nil) {
            self.interval = interval
            self.budget = budget
            self.maxTicks = maxTicks
        }

        /// The interval positive; the budget positive and shorter than the interval the registration ticks at
        /// (its own, else `configuration`'s).
        public func validate(against configuration: Configuration) throws(ConfigurationValueError) {
            let field = "KeepAlive.RegistrationOptions"
            if let interval, interval <= .zero {
                throw ConfigurationValueError(
                    field: "\(field).interval", reason: "must be positive, not \(interval.compact)")
            }
            if let budget {
                try Configuration.validate(
                    budget: budget, interval: interval ?? configuration.interval, field: "\(field).budget")
            }
        }
    }
}

/// Returned by ``KeepAlive/register(name:options:onReport:handler:)``; pass it to ``KeepAlive/unregister(_:)``.
public struct RegistrationToken: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64

    public static func < (lhs: RegistrationToken, rhs: RegistrationToken) -> Bool {
        lhs.rawValue < rhs.rawValue
    }

    public var description: String { "registration#\(rawValue)" }
}
