public import KeepAlive
public import Readings
import Basics

/// What one poll of one device came to, returned by the poll as a value: the engine makes the device's
/// ``PollRecord`` from it, for a scheduled poll and a poll on command alike.
public struct PollOutcome: Sendable {
    /// `newData`, `noData` or `failed` with the error that ended the poll (the last attempt's).
    public var result: PollResult
    /// The last attempt's values, in the order the spec lists its reads.
    public var values: [PollRecord.Value] = []
    public var notifications: [PollRecord.Notification] = []
    /// ``values`` and ``notifications`` decoded (``PeripheralSpec/readings(values:notifications:presentations:)``).
    public var readings: [Reading] = []
    /// Connection attempts made (0: the poll never held a connection slot).
    public var attempts = 0
    /// How long the poll waited for a connection slot on its adapter (`nil`: it never asked for one).
    public var slotWait: Duration?
    /// How long its links were up, over all its attempts, from the stack's own connection signals
    /// (``PeripheralTransport/linkTime(of:)``); `nil` when the transport could not say.
    public var link: Duration?
    /// For a device shared by a fleet: which gateway polled it, on which adapter, and after which handover.
    public var holder: PollRecord.Holder?
    /// What held the device's link when the tick gave up for it (``PollRecord/busy``).
    public var busy: String?
    /// For a device listened to: what was heard of it during the interval (``PollRecord/heard``).
    public var heard: PollRecord.Heard?
    /// The fleet's admission declined the poll: another gateway holds the device. No radio work was done and
    /// no record is written; the scheduler reports the tick as `TickReport.Outcome.declined`.
    public var declined = false
    /// Declined because its operator paused the device (``PollAdmissionDecision/paused``).
    public var paused = false

    public init(result: PollResult) {
        self.result = result
    }

    /// A poll the admission declined.
    static let declined: PollOutcome = {
        var outcome = PollOutcome(result: .noData)
        outcome.declined = true
        return outcome
    }()

    /// The transport's error that failed the poll, as the record states it.
    public var failure: TransportError? {
        guard case .failed(let error) = result else { return nil }
        return PollEngine.transportError(error)
    }
}

/// What the engine remembers of one device between its polls: its spec, the 0x2904 descriptors asked for so far
/// (a descriptor describes the characteristic, so it is asked once per device), and the last values (what makes
/// a poll `newData` or `noData`). Shared by its scheduled polls and its polls on command, which the device's
/// gate keeps apart; nothing of one poll in progress is kept here.
final class PolledDevice: Sendable {
    private struct State {
        var lastValues: [PollRecord.Value]?
        /// The format, or nil when the characteristic has none or it could not be parsed.
        var presentations: [BluetoothUUID: PresentationFormat?] = [:]
    }

    let spec: PeripheralSpec
    private let state = Locked(State())

    init(spec: PeripheralSpec) {
        self.spec = spec
    }

    /// Whether the 0x2904 descriptor of `characteristic` has been asked for.
    func knowsPresentation(of characteristic: BluetoothUUID) -> Bool {
        state.withLock { $0.presentations[characteristic] != nil }
    }

    func setPresentation(_ format: PresentationFormat?, of characteristic: BluetoothUUID) {
        state.withLock { $0.presentations[characteristic] = .some(format) }
    }

    /// The poll's readings, decoded with every 0x2904 format known now.
    func readings(values: [PollRecord.Value], notifications: [PollRecord.Notification]) -> [Reading] {
        guard !values.isEmpty || !notifications.isEmpty else { return [] }
        let presentations = state.withLock { $0.presentations.compactMapValues { $0 } }
        return spec.readings(values: values, notifications: notifications, presentations: presentations)
    }

    /// Remembers a successful poll's values; true when it brought new data (a changed value or any
    /// notification).
    func succeeded(values: [PollRecord.Value], notifications: [PollRecord.Notification]) -> Bool {
        state.withLock { state in
            let changed = state.lastValues != values
            state.lastValues = values
            return (changed && !values.isEmpty) || !notifications.isEmpty
        }
    }
}
