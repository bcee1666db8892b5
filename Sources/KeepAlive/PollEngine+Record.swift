import Locking
import Readings

/// What one device's poll in progress has gathered; read by the report that closes the tick.
final class PollScratch: Sendable {
    struct Snapshot {
        var tick: UInt64 = 0
        var values: [PollRecord.Value] = []
        var notifications: [PollRecord.Notification] = []
        var attempts = 0
        var failure: TransportError?
        /// The admission declined this poll: it writes no record.
        var declined = false
        /// The admission's holder, for a shared device.
        var holder: PollRecord.Holder?
    }

    fileprivate struct State {
        var current = Snapshot()
        var lastValues: [PollRecord.Value]?
        /// The 0x2904 descriptors asked for so far (a descriptor describes the characteristic, so it is asked
        /// once per device): the format, or nil when the characteristic has none or it could not be parsed.
        var presentations: [BluetoothUUID: PresentationFormat?] = [:]
    }

    /// The device this scratch is for.
    let spec: PeripheralSpec
    fileprivate let state = Locked(State())

    init(spec: PeripheralSpec) {
        self.spec = spec
    }

    func begin(tick: UInt64) {
        state.withLock { $0.current = Snapshot(tick: tick) }
    }

    /// What the admission said about the poll begun last.
    var admission: (declined: Bool, holder: PollRecord.Holder?) {
        state.withLock { ($0.current.declined, $0.current.holder) }
    }

    /// The tick of the poll last begun (0 before any).
    var lastTick: UInt64 {
        state.withLock { $0.current.tick }
    }

    func setAttempts(_ attempts: Int) {
        state.withLock { $0.current.attempts = attempts }
    }

    /// Values and notifications belong to one attempt: a retry starts them afresh.
    func resetAttemptData() {
        state.withLock { state in
            state.current.values = []
            state.current.notifications = []
        }
    }

    func add(value: PollRecord.Value) {
        state.withLock { $0.current.values.append(value) }
    }

    func add(notification: PollRecord.Notification) {
        state.withLock { $0.current.notifications.append(notification) }
    }

    /// Whether the 0x2904 descriptor of `characteristic` has been asked for.
    func knowsPresentation(of characteristic: BluetoothUUID) -> Bool {
        state.withLock { $0.presentations[characteristic] != nil }
    }

    func setPresentation(_ format: PresentationFormat?, of characteristic: BluetoothUUID) {
        state.withLock { $0.presentations[characteristic] = .some(format) }
    }

    /// Starts from `other`'s 0x2904 answers (a command's poll, on a scratch of its own).
    func adoptPresentations(of other: PollScratch) {
        let known = other.state.withLock { $0.presentations }
        state.withLock { $0.presentations.merge(known) { mine, _ in mine } }
    }

    var presentations: [BluetoothUUID: PresentationFormat] {
        state.withLock { $0.presentations.compactMapValues { $0 } }
    }

    func decline() {
        state.withLock { $0.current.declined = true }
    }

    func setHolder(_ holder: PollRecord.Holder?) {
        state.withLock { $0.current.holder = holder }
    }

    func fail(_ error: TransportError) {
        state.withLock { $0.current.failure = error }
    }

    /// Marks the poll successful; true when it brought new data (a changed value or any notification).
    func finishSuccess() -> Bool {
        state.withLock { state in
            state.current.failure = nil
            let changed = state.lastValues != state.current.values
            state.lastValues = state.current.values
            return (changed && !state.current.values.isEmpty) || !state.current.notifications.isEmpty
        }
    }

    func snapshot(tick: UInt64) -> Snapshot {
        state.withLock { state in
            state.current.tick == tick ? state.current : Snapshot(tick: tick)
        }
    }
}

extension PollEngine {
    /// Turns the scheduler's report for one device's tick into its record and publishes it.
    func record(_ report: TickReport, scratch: PollScratch) {
        let spec = scratch.spec
        var record = PollRecord(
            device: spec.name,
            peripheral: spec.peripheral,
            tick: report.tick,
            scheduled: report.scheduled,
            fired: report.fired,
            result: .failed,
            values: [],
            notifications: [],
            failure: nil,
            window: nil,
            attempts: 0,
            interval: report.interval,
            power: report.power
        )
        switch report.outcome {
        case .skipped where admission.map({ !$0.records(spec.name) }) ?? false:
            return  // another gateway's device: its holder records the tick
        case .skipped(let reason):
            let message: String =
                switch reason {
                case .overlap: "tick skipped: the previous poll of this device is still running"
                case .backoff: "tick skipped: backing off after consecutive failures"
                case .refused: "tick skipped: the ledger is closed (shutting down or going to sleep)"
                }
            record.failure = PollRecord.Failure(code: "skipped", message: message, transient: true, dbusName: nil)
        case .ran(let result, let window):
            let snapshot = scratch.snapshot(tick: report.tick)
            if snapshot.declined { return }
            record.holder = snapshot.holder
            if let holder = snapshot.holder { record.peripheral.adapter = holder.adapter }
            record.values = snapshot.values
            record.notifications = snapshot.notifications
            record.readings = spec.readings(values: snapshot.values, notifications: snapshot.notifications, presentations: scratch.presentations)
            record.attempts = snapshot.attempts
            record.window = PollRecord.Window(id: window.id, budget: window.budget, used: window.used, outcome: window.outcome)
            switch result {
            case .newData:
                record.result = .newData
            case .noData:
                record.result = .noData
            case .failed(let error):
                record.failure = Self.failure(error, snapshot: snapshot, window: window)
            }
        }
        if record.result == .failed {
            logger.debug(
                "poll record: failed",
                metadata: ["device": "\(spec.name)", "code": "\(record.failure?.code ?? "?")"]
            )
        }
        onRecord?(record)
        broadcast.publish(record)
    }

    static func failure(
        _ error: any Error,
        snapshot: PollScratch.Snapshot,
        window: BackgroundTaskRecord
    ) -> PollRecord.Failure {
        if let keepAliveError = error as? KeepAliveError {
            return PollRecord.Failure(
                code: keepAliveError.code.description,
                message: keepAliveError.message,
                transient: true,
                dbusName: nil
            )
        }
        let transportError = snapshot.failure ?? transportError(error)
        var code = transportError.code.rawValue
        if transportError.code == .timeout, window.outcome == .expired || window.outcome == .cancelled {
            code = window.outcome == .expired ? "windowExpired" : "cancelled"
        }
        return PollRecord.Failure(
            code: code,
            message: transportError.message,
            transient: transportError.isTransient,
            dbusName: transportError.dbusName
        )
    }
}
