import KeepAlive

/// Which polls asked for over MQTT go ahead: at most one pending per device, and the next one only the device's
/// floor (`min_interval`) after the last one ended. Anyone who can publish to the broker can ask for polls: 200 of
/// them at once used to queue behind one another, and the sensor was connected almost without pause for 20 s while
/// the rest expired waiting. Now the others are refused, to be answered on the device's error topic.
///
/// A poll counts from when it ends, not when it was asked for, so a poll that waited for a scheduled one still
/// leaves the sensor the whole floor afterwards; one the engine refused (a shared device another gateway holds,
/// the ledger closed) never touched the sensor and does not count. Scheduled polls are the scheduler's, and not
/// counted here. Pure: instants come in (a monotonic clock's). Its keys are the devices commands name, which the
/// bridge has checked are configured, so its memory is bounded by the configuration, not by what arrives.
///
/// ```swift
/// var limiter = CommandPollLimiter()
/// switch limiter.admit("sensor-1", floor: .seconds(5), at: now) {
/// case .poll: poll(); limiter.finished("sensor-1", polled: true, at: later)
/// case let refused: bridge.refuse(command, kind: refused.kind, reason: refused.reason)
/// }
/// ```
package struct CommandPollLimiter: Sendable {
    /// What to do with one poll command.
    package enum Decision: Sendable, Hashable {
        /// Poll, then call ``CommandPollLimiter/finished(_:polled:at:)``.
        case poll
        /// Refused: a poll asked for earlier is still waiting or running.
        case pending
        /// Refused: the last poll on command ended `ago`, less than `floor` ago.
        case tooSoon(ago: Duration, floor: Duration)

        /// The word the log folds refusals by (`pollPending`, `pollTooSoon`); empty for ``poll``.
        package var kind: String {
            switch self {
            case .poll: ""
            case .pending: "pollPending"
            case .tooSoon: "pollTooSoon"
            }
        }

        /// What the sender reads on the error topic; empty for ``poll``.
        package var reason: String {
            switch self {
            case .poll: ""
            case .pending: "a poll is already pending"
            case .tooSoon(let ago, let floor):
                "polled on command \(ago.compact) ago; at most one per \(floor.compact) (min_interval)"
            }
        }
    }

    private var pending: Set<String> = []
    /// When the last poll on command of each device ended (polls the engine refused are not counted).
    private var lastEnded: [String: Duration] = [:]

    package init() {}

    /// A poll of `device` asked for at `now`; `floor` is its `min_interval`. An admitted poll is pending until
    /// ``finished(_:polled:at:)``.
    package mutating func admit(_ device: String, floor: Duration, at now: Duration) -> Decision {
        if pending.contains(device) { return .pending }
        if let ended = lastEnded[device], now - ended < floor {
            return .tooSoon(ago: now - ended, floor: floor)
        }
        pending.insert(device)
        return .poll
    }

    /// The admitted poll of `device` is over at `now`: `polled` when it reached the sensor (a record came back),
    /// false when the engine refused it before.
    package mutating func finished(_ device: String, polled: Bool, at now: Duration) {
        pending.remove(device)
        if polled { lastEnded[device] = now }
    }
}
