import KeepAlive
public import Polling

/// What one poll record says about its adapter (not about its device): the input of the health model.
public enum AdapterSignal: Sendable, Hashable {
    /// The poll worked: the adapter is fine.
    case healthy
    /// A link-level failure any adapter can have when wedged: aborted or timed-out connects, `InProgress` that
    /// never clears, "Software caused connection abort", an expired window.
    case linkFailure(code: String)
    /// The adapter is powered off, behind our back.
    case poweredOff
    /// The adapter is rfkill-blocked: no D-Bus call can help, an operator (or a switch) must.
    case rfkillBlocked
    /// The adapter is not on the bus (unplugged, or back under another index).
    case adapterGone
    /// bluetoothd is not on the bus, or just restarted.
    case bluetoothdDown
    /// The device could not be found (discovery found nothing it used to find): an adapter-level sign when
    /// every device on the adapter says so.
    case notFound
    /// A failure of the device or the request (ATT error, not permitted…): the adapter worked.
    case deviceFailure
    /// The tick was skipped (backoff, overlap, asleep) or found no free connection slot: says nothing.
    case neutral

    /// Classifies a record's result and error code (the codes of ``TransportError/Code`` and the record's own
    /// `windowExpired`, `skipped`…).
    public init(result: PollRecord.Result, failureCode: String?, message: String?) {
        switch result {
        case .newData, .noData:
            self = .healthy
            return
        case .failed:
            break
        }
        switch failureCode ?? "" {
        case "connectionAborted", "connectionCanceled", "inProgress", "notConnected", "timeout", "ioError",
            "windowExpired",
            "notReady", "failed", "deviceVanished":
            self = .linkFailure(code: failureCode ?? "")
        case "adapterUnavailable":
            self = (message ?? "").contains("rfkill") ? .rfkillBlocked : .poweredOff
        case "adapterNotFound":
            self = .adapterGone
        case "serviceUnavailable", "serviceRestarted":
            self = .bluetoothdDown
        case "deviceNotFound":
            self = .notFound
        case "skipped", "cancelled", "forcedEnd", "noSlot", "notHeard", "badAdvertisement":
            self = .neutral
        default:
            self = .deviceFailure
        }
    }

    public init(_ record: PollRecord) {
        self.init(result: record.result, failureCode: record.failure?.code, message: record.failure?.message)
    }
}

/// The health of one adapter, judged in rounds: a round ends when every device on the adapter has reported
/// once since it began (devices with different intervals then count once per round, whatever their pace).
/// A round is *failing* when no device succeeded and every device that said something said the adapter is
/// wrong; *healthy* when any device succeeded or failed for a reason of its own (the adapter carried it).
/// Pure: records in, verdicts out.
public struct AdapterHealth: Sendable, Hashable {
    /// What a round found.
    public enum RoundVerdict: Sendable, Hashable {
        case healthy
        /// Every device failed for the adapter's sake; `signals` counts what they said (`connectionAborted`,
        /// `poweredOff`…), for the log line that says why.
        case failing(signals: [String: Int])
        /// Nothing but skipped ticks.
        case silent
    }

    public let adapter: String
    public let devices: Set<String>
    private var round: [String: AdapterSignal] = [:]
    /// Failing rounds in a row (reset by a healthy one).
    public private(set) var consecutiveFailingRounds = 0
    /// The last failing round's signals.
    public private(set) var lastFailure: [String: Int] = [:]

    public init(adapter: String, devices: Set<String>) {
        self.adapter = adapter
        self.devices = devices
    }

    /// Adds one record's signal; returns the round's verdict when this record ended a round. A device that
    /// reports twice before the round ends replaces its first signal (the newest one counts).
    public mutating func observe(device: String, _ signal: AdapterSignal) -> RoundVerdict? {
        guard devices.contains(device) else { return nil }
        round[device] = signal
        guard round.count == devices.count else { return nil }
        let signals = round.values
        round = [:]
        if signals.contains(where: { $0 == .healthy || $0 == .deviceFailure }) {
            consecutiveFailingRounds = 0
            lastFailure = [:]
            return .healthy
        }
        let failing = signals.filter { $0 != .neutral }
        guard !failing.isEmpty else { return .silent }
        var counts: [String: Int] = [:]
        for signal in failing { counts[signal.name, default: 0] += 1 }
        consecutiveFailingRounds += 1
        lastFailure = counts
        return .failing(signals: counts)
    }

    /// Forgets the failing rounds so far (after a healing action, or while its cooldown lasts: what the adapter
    /// did before the action says nothing about after it).
    public mutating func resetFailures() {
        consecutiveFailingRounds = 0
    }

    /// Forgets the round in progress (after a healing action, what came before it no longer counts).
    public mutating func restartRound() {
        round = [:]
    }
}

extension AdapterSignal {
    /// The name in logs and in `why`: the error code for link failures.
    public var name: String {
        switch self {
        case .healthy: "healthy"
        case .linkFailure(let code): code
        case .poweredOff: "poweredOff"
        case .rfkillBlocked: "rfkillBlocked"
        case .adapterGone: "adapterGone"
        case .bluetoothdDown: "bluetoothdDown"
        case .notFound: "deviceNotFound"
        case .deviceFailure: "deviceFailure"
        case .neutral: "skipped"
        }
    }
}
