/// Exactly one per registration per tick: what happened, or why nothing did.
public struct TickReport: Sendable {
    public enum SkipReason: String, Sendable, Hashable {
        /// The previous tick's callback was still running (it ignored expiry); ticks never stack.
        case overlap
        /// The registration is backing off after consecutive failures.
        case backoff
        /// The ledger was closed (shutting down, or the host about to sleep).
        case refused
    }

    public enum Outcome: Sendable {
        /// The callback ran in `window`; `result` is what it returned (or a failure if it was force-ended).
        case ran(result: PollResult, window: BackgroundTaskRecord)
        case skipped(SkipReason)
        /// The registration's gate declined the tick before any work ran: it belongs to someone else (a device
        /// another gateway of a fleet holds). Neither a success nor a failure: backoff is left as it was.
        case declined
    }

    public var name: String
    public var token: RegistrationToken
    /// This registration's tick number, from 0.
    public var tick: UInt64
    /// The grid instant the tick stood for.
    public var scheduled: KeepAliveInstant
    /// When it actually fired.
    public var fired: KeepAliveInstant
    /// The effective interval at the time (stretched in low power).
    public var interval: Duration
    public var power: PowerState
    public var outcome: Outcome
    /// What the work returned beside its result, for whoever registered it (the poll engine's
    /// `PollOutcome` (module Polling)); `nil` for skips, declines, forced ends and plain callbacks.
    public var detail: (any Sendable)? = nil

    /// The callback's result, with skips reported as failures (a skipped tick is a missed poll) and a declined
    /// tick as `noData` (switch on ``outcome`` to tell it from a poll that found nothing new).
    public var result: PollResult {
        switch outcome {
        case .ran(let result, _): result
        case .skipped(let reason): .failed(KeepAliveError(code: .skipped, message: "tick skipped: \(reason.rawValue)"))
        case .declined: .noData
        }
    }
}

/// What the scheduler reports as it happens, through ``KeepAlive/events()``.
public enum KeepAliveEvent: Sendable {
    case started(at: KeepAliveInstant, power: PowerState)
    /// A registration's tick fired (its window is about to begin, unless the report says it was skipped).
    case fired(name: String, tick: UInt64, scheduled: KeepAliveInstant, at: KeepAliveInstant)
    /// Grid points that passed while the process was not running (a suspend, a clock jump): never fired.
    case missed(name: String, count: Int64, at: KeepAliveInstant)
    case powerChanged(from: PowerState, to: PowerState, at: KeepAliveInstant)
    case report(TickReport)
    case stopped(at: KeepAliveInstant)
}

/// Errors the scheduler itself produces.
public struct KeepAliveError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let rawValue: String
        public var description: String { rawValue }

        /// The callback did not return within its window's deadline and grace.
        public static let forcedEnd = Code(rawValue: "forcedEnd")
        /// The tick was skipped (overlap, backoff, ledger closed).
        public static let skipped = Code(rawValue: "skipped")
        /// `run()` was called on a scheduler that is already running.
        public static let alreadyRunning = Code(rawValue: "alreadyRunning")
    }

    public var code: Code
    public var message: String

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}
