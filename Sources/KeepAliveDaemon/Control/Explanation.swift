import KeepAlive
import Polling

#if canImport(Glibc)
    import Glibc
#endif

/// A device's recent decisions in words, and where it stands now: what `keepalive explain DEVICE` prints, e.g.
/// "14:02:00 not polled: backing off after 4 failures (connectionAborted), next try 14:06:00".
struct Explanation: Sendable {
    struct Entry: Sendable {
        /// Wall-clock milliseconds of the first and the last decision of the run.
        var first: Int64
        var last: Int64
        var count: Int
        /// ``Decision/Kind`` by name (`polled`, `failed`, `backoff`, `overlap`, `closed`, `noSlot`, `notHeard`,
        /// `heldElsewhere`, `paused`, `healing`).
        var kind: String
        /// The failure code, or the healing action.
        var code: String?
        var text: String
    }

    /// Where the device stands now, one sentence each (paused, backing off, held elsewhere, the next poll).
    var now: [String]
    /// Oldest first.
    var entries: [Entry]

    /// What else explaining needs besides the board: the scheduler's view and the host's.
    struct Context: Sendable {
        var schedule: KeepAlive.RegistrationStatus?
        /// The interval the configuration gives the device.
        var configuredInterval: Duration
        var unhealthyAdapters: [String: String] = [:]
        /// The scheduler is not running (starting, or shutting down).
        var schedulerStopped = false
        /// Turns a scheduler instant into wall-clock milliseconds.
        var wallTime: @Sendable (KeepAliveInstant) -> Int64
        /// `HH:MM:SS` of wall-clock milliseconds, in the daemon's local time.
        var clockText: @Sendable (Int64) -> String = Explanation.localTime
    }

    init(
        device: DeviceBoard.Device, state: DeviceBoard.DeviceState, decisions: [Decision],
        strings: DecisionLog.Strings, context: Context
    ) {
        let time = context.clockText
        entries = decisions.map { decision in
            Entry(
                first: decision.first, last: decision.last, count: Int(decision.count),
                kind: Self.name(of: decision.kind), code: strings[decision.code],
                text: Self.text(of: decision, device: device, strings: strings, time: time))
        }
        var now: [String] = []
        if let pausedAt = state.pausedAt {
            now.append(
                "paused by its operator since \(time(pausedAt)): not polled until `keepalive resume \(device.name)`")
        }
        if context.schedulerStopped {
            now.append("not polling: the scheduler is not running (starting, or shutting down)")
        }
        if let adapterWhy = context.unhealthyAdapters[device.adapter] {
            now.append("its adapter \(device.adapter) is unhealthy: \(adapterWhy)")
        }
        if let schedule = context.schedule {
            if schedule.effectiveInterval == nil {
                now.append("polling paused: the host's battery is critical (low_power: critical pauses polling)")
            }
            if let until = schedule.backoffUntil {
                let code = state.lastFailureCode.map { " (\($0))" } ?? ""
                let failures = schedule.consecutiveFailures
                now.append(
                    "backing off after \(failures) failure\(failures == 1 ? "" : "s")\(code): "
                        + "next try \(time(context.wallTime(until)))")
            }
            if decisions.last?.kind == .heldElsewhere {
                let holder = strings[decisions.last?.holder ?? 0] ?? "another gateway"
                now.append("held by \(holder) since \(time(decisions.last?.first ?? 0)): that gateway polls it")
            }
            // While backing off, the next try above is the next poll; the ticks before it are skipped.
            if state.pausedAt == nil, schedule.backoffUntil == nil, let next = schedule.nextFire,
                let effective = schedule.effectiveInterval
            {
                now.append(
                    "next \(device.passive ? "record" : "poll") at \(time(context.wallTime(next))) "
                        + "(every \(effective.compact)\(Self.why(schedule, configured: context.configuredInterval)))")
            }
        }
        self.now = now
    }

    /// Why the interval in force is not the configured one ("" when it is).
    static func why(_ schedule: KeepAlive.RegistrationStatus, configured: Duration) -> String {
        var reasons: [String] = []
        if schedule.interval != configured {
            reasons.append("set by command, \(configured.compact) configured")
        }
        if let effective = schedule.effectiveInterval, effective != schedule.interval {
            let state = schedule.power == .critical ? "battery critical" : "host in low power"
            reasons.append("\(state), \(schedule.interval.compact) stretched")
        }
        return reasons.isEmpty ? "" : ": " + reasons.joined(separator: "; ")
    }

    /// Why the interval in force is what it is, in one word: `configured`, `command`, `low power`, `critical`.
    static func intervalReason(_ schedule: KeepAlive.RegistrationStatus, configured: Duration) -> String {
        if schedule.effectiveInterval == nil { return "critical: paused" }
        if schedule.effectiveInterval != schedule.interval {
            return schedule.power == .critical ? "critical" : "low power"
        }
        return schedule.interval != configured ? "command" : "configured"
    }

    static func name(of kind: Decision.Kind) -> String {
        switch kind {
        case .polled: "polled"
        case .failed: "failed"
        case .backoff: "backoff"
        case .overlap: "overlap"
        case .closed: "closed"
        case .noSlot: "noSlot"
        case .notHeard: "notHeard"
        case .heldElsewhere: "heldElsewhere"
        case .paused: "paused"
        case .healing: "healing"
        }
    }

    /// One decision (a run of them) in words, its time first.
    static func text(
        of decision: Decision, device: DeviceBoard.Device, strings: DecisionLog.Strings,
        time: (Int64) -> String
    ) -> String {
        let when =
            decision.count > 1
            ? "\(time(decision.first))–\(time(decision.last)) (\(decision.count)×)" : time(decision.first)
        let code = strings[decision.code] ?? "?"
        let adapter = strings[decision.adapter] ?? device.adapter
        let command = decision.flags.contains(.command) ? " on command" : ""
        var text: String
        switch decision.kind {
        case .polled:
            let what = decision.flags.contains(.newData) ? "new data" : "nothing new"
            if decision.flags.contains(.passive) {
                text = "heard: \(what)"
            } else {
                let window = decision.value > 0 ? ", window used \(Duration.milliseconds(decision.value).compact)" : ""
                text = "polled\(command): \(what)\(window)"
            }
        case .failed:
            let attempts = decision.value > 1 ? " after \(decision.value) attempts" : ""
            text =
                "\(decision.flags.contains(.passive) ? "refused an advertisement" : "failed\(command)"): "
                + "\(code)\(attempts)"
            if decision.flags.contains(.adapterUnhealthy) {
                text += "; adapter \(adapter) was unhealthy (the healing ladder had given up on it)"
            }
        case .backoff:
            let failures = "\(decision.value) failure\(decision.value == 1 ? "" : "s")"
            let cause = strings[decision.code].map { " (\($0))" } ?? ""
            let next = decision.next > 0 ? ", next try \(time(decision.next))" : ""
            text = "not polled: backing off after \(failures)\(cause)\(next)"
        case .overlap:
            text = "not polled: its previous poll was still running (ticks never stack)"
        case .closed:
            text = "not polled: the daemon was shutting down or the host going to sleep (the ledger was closed)"
        case .noSlot:
            if let busy = strings[decision.code] {
                text = "not polled: the device was busy, its link held by \(busy) (not a failure of the device)"
            } else {
                let waited = Duration.milliseconds(decision.value).compact
                text = "not polled: no connection slot free on \(adapter) for \(waited) (other devices held them all)"
            }
        case .notHeard:
            text =
                decision.flags.contains(.passive)
                ? "not heard: no advertisement in its interval"
                : "not polled: not heard advertising (poll_when: heard), no Connect sent"
        case .heldElsewhere:
            let holder = strings[decision.holder] ?? "another gateway"
            text = "not polled: held by \(holder) (fleet lease), that gateway polls it"
        case .paused:
            text = "not polled: paused by its operator"
        case .healing:
            text = "adapter \(adapter): healing step \(code)"
        }
        if let handover = strings[decision.handover] {
            text += " — took the device over (\(handover))"
        }
        if decision.kind != .healing, decision.kind != .paused, decision.kind != .heldElsewhere {
            let interval = Duration.milliseconds(decision.intervalMilliseconds).compact
            switch decision.power {
            case .lowPower: text += " — host in low power, interval stretched to \(interval)"
            case .critical: text += " — host battery critical, interval stretched to \(interval)"
            case .normal: break
            }
        }
        return "\(when) \(text)"
    }

    /// `HH:MM:SS` in local time.
    static func localTime(_ milliseconds: Int64) -> String {
        var seconds = time_t(milliseconds / 1000)
        var parts = tm()
        localtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))"
    }
}
