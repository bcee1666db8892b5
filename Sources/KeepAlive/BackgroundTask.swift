/// Identifies one window in a ``BackgroundTaskLedger`` (the analogue of `UIBackgroundTaskIdentifier`).
///
/// ```swift
/// let id = ledger.begin(name: "greenhouse-3", budget: .seconds(20))
/// guard id != .invalid else { return }   // the ledger is closed: shutting down or about to sleep
/// defer { ledger.end(id) }
/// ```
public struct BackgroundTaskID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64

    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    /// Returned by `begin` when the ledger refuses new windows (`UIBackgroundTaskIdentifier.invalid`).
    public static let invalid = BackgroundTaskID(rawValue: 0)

    public static func < (lhs: BackgroundTaskID, rhs: BackgroundTaskID) -> Bool {
        lhs.rawValue < rhs.rawValue
    }

    public var description: String {
        self == .invalid ? "invalid" : "#\(rawValue)"
    }
}

/// How a background task window ended.
public enum BackgroundTaskOutcome: String, Sendable, Hashable, CaseIterable {
    /// Ended by its owner before the deadline.
    case completed
    /// The deadline passed, the expiration handler ran, and the owner ended the window within the grace.
    case expired
    /// Not ended within the grace after expiring: the ledger ended it and logged an error.
    case forcedEnd
    /// Expired early because the ledger was shutting down or the host was going to sleep, then ended.
    case cancelled
    /// `begin` was called while the ledger was closed; the caller got ``BackgroundTaskID/invalid``.
    case refused
}

/// One line of the ledger's history: what happened to a window. Answers "why didn't device X poll?".
public struct BackgroundTaskRecord: Sendable, Hashable {
    public var id: BackgroundTaskID
    public var name: String
    public var began: KeepAliveInstant
    public var ended: KeepAliveInstant
    public var budget: Duration
    public var outcome: BackgroundTaskOutcome

    /// Time between begin and end.
    public var used: Duration { began.duration(to: ended) }

    public init(
        id: BackgroundTaskID,
        name: String,
        began: KeepAliveInstant,
        ended: KeepAliveInstant,
        budget: Duration,
        outcome: BackgroundTaskOutcome
    ) {
        self.id = id
        self.name = name
        self.began = began
        self.ended = ended
        self.budget = budget
        self.outcome = outcome
    }
}

/// An open window as the ledger sees it.
public struct BackgroundTaskEntry: Sendable, Hashable {
    public enum Phase: String, Sendable, Hashable {
        /// Running with more than the warning lead left.
        case running
        /// Less than the warning lead left.
        case warned
        /// The deadline passed (or the ledger expired it early); the expiration handler has run.
        case expired
    }

    public var id: BackgroundTaskID
    public var name: String
    public var began: KeepAliveInstant
    public var budget: Duration
    public var deadline: KeepAliveInstant
    public var phase: Phase
}

/// What the ledger reports as it happens, in order, through ``BackgroundTaskLedger/events()``.
public enum BackgroundTaskEvent: Sendable, Hashable {
    case began(BackgroundTaskEntry)
    /// Time remaining dropped under the warning lead ("less than 10 s: tell the business").
    case warning(id: BackgroundTaskID, name: String, timeRemaining: Duration, at: KeepAliveInstant)
    /// The deadline passed (or the ledger expired the window early); the expiration handler ran.
    case expired(id: BackgroundTaskID, name: String, at: KeepAliveInstant, early: Bool)
    case ended(BackgroundTaskRecord)
}
