import Basics
import KeepAlive
import Polling
import Readings

#if canImport(Glibc)
    import Glibc
#endif

/// What the daemon knows of each device now, for `keepalive status` and `keepalive explain`: the last record, the
/// failures in a row, what was heard, whether its operator paused it, and its recent decisions (``DecisionLog``).
///
/// A record sink, a peer of the JSON Lines output and the MQTT spool: it sees every record, in `seq` order, and
/// takes only its own lock. A tick that writes no record (declined: another gateway holds the device, or it is
/// paused) reaches it from ``ControlAdmission``.
final class DeviceBoard: RecordSink, Sendable {
    /// A configured device, as the board shows it before its first record.
    struct Device: Sendable {
        var name: String
        var address: String
        var adapter: String
        /// Heard, never connected to (`advertisements:` and nothing to read).
        var passive: Bool
        /// Listened to for its advertisements (a passive sensor, or `poll_when: heard`).
        var listened: Bool
        /// The interval the configuration gives it.
        var interval: Duration
    }

    /// The last record of a device, as status shows it.
    struct LastRecord: Sendable {
        var result: PollRecord.Result
        var failure: PollRecord.Failure?
        var readings: [Reading]
        var trigger: PollRecord.Trigger
        var sequence: UInt64
        /// Wall-clock milliseconds since 1970 when the tick fired.
        var at: Int64
        var windowUsed: Duration?
    }

    struct DeviceState: Sendable {
        var log = DecisionLog()
        var last: LastRecord?
        /// Polls failed in a row (not counting skips, silence or contention, which say nothing of the device).
        var failuresInRow = 0
        var lastFailureCode: String?
        var slotWait: Duration?
        /// Polls that waited for a connection slot, since start.
        var slotWaits: UInt64 = 0
        var link: Duration?
        var holder: String?
        var heard: PollRecord.Heard?
        /// Wall-clock milliseconds of the last record that heard it.
        var heardAt: Int64?
        /// Wall-clock milliseconds since it was paused by its operator; `nil` when not paused.
        var pausedAt: Int64?
        var records: UInt64 = 0
    }

    private struct State {
        var devices: [String: DeviceState] = [:]
        var strings = DecisionLog.Strings()
    }

    let configured: [Device]
    private let indexByName: [String: Int]
    private let state = Locked(State())
    /// The scheduler's clock: record instants are placed on the wall clock relative to it.
    private let clock: @Sendable () -> KeepAliveInstant
    /// Wall-clock milliseconds since 1970.
    let wallNow: @Sendable () -> Int64
    /// The adapters reported unhealthy now (the healing ladder gave up on them).
    private let unhealthyAdapters: @Sendable () -> [String: String]
    /// Where a device's ticks stand in the scheduler (set once the poll engine exists).
    private let scheduleSource = Locked<(@Sendable (String) -> KeepAlive.RegistrationStatus?)?>(nil)
    /// Told of every record after the board took it (the control interface's `Record` signal).
    private let recordObserver = Locked<(@Sendable (SequencedRecord) -> Void)?>(nil)

    init(
        devices: [Device], clock: @escaping @Sendable () -> KeepAliveInstant,
        wallNow: @escaping @Sendable () -> Int64 = DeviceBoard.wallMilliseconds,
        unhealthyAdapters: @escaping @Sendable () -> [String: String] = { [:] }
    ) {
        configured = devices
        var indices: [String: Int] = [:]
        for (index, device) in devices.enumerated() where indices[device.name] == nil { indices[device.name] = index }
        indexByName = indices
        self.clock = clock
        self.wallNow = wallNow
        self.unhealthyAdapters = unhealthyAdapters
    }

    static func wallMilliseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }

    func device(named name: String) -> Device? {
        indexByName[name].map { configured[$0] }
    }

    /// Where `device`'s ticks stand in the scheduler now.
    func schedule(of device: String) -> KeepAlive.RegistrationStatus? {
        scheduleSource.withLock { $0 }?(device)
    }

    func follow(schedule: @escaping @Sendable (String) -> KeepAlive.RegistrationStatus?) {
        scheduleSource.withLock { $0 = schedule }
    }

    func observeRecords(_ observer: (@Sendable (SequencedRecord) -> Void)?) {
        recordObserver.withLock { $0 = observer }
    }

    /// The wall-clock milliseconds of a scheduler instant.
    func wallTime(of instant: KeepAliveInstant) -> Int64 {
        let now = clock()
        let ago = instant.duration(to: now)
        return wallNow() - ago.milliseconds
    }

    // MARK: Pause

    /// Pauses `device`: its ticks are declined (no radio work, no record) until ``resume(_:)``. Returns false when
    /// it was already paused.
    @discardableResult
    func pause(_ device: String) -> Bool {
        let at = wallNow()
        return state.withLock { state in
            guard state.devices[device]?.pausedAt == nil else { return false }
            state.devices[device, default: DeviceState()].pausedAt = at
            return true
        }
    }

    /// Returns false when it was not paused.
    @discardableResult
    func resume(_ device: String) -> Bool {
        state.withLock { state in
            guard state.devices[device]?.pausedAt != nil else { return false }
            state.devices[device]?.pausedAt = nil
            return true
        }
    }

    func isPaused(_ device: String) -> Bool {
        state.withLock { $0.devices[device]?.pausedAt != nil }
    }

    // MARK: Decisions

    /// A tick that wrote no record: another gateway holds the device (`holder`, when known), or it is paused.
    func declined(_ device: String, paused: Bool, holder: String?) {
        let at = wallTime(of: clock())
        state.withLock { state in
            // Neither power nor interval: a declined tick's words do not use them (and the scheduler is not asked
            // on the tick's path, see ``accept(_:)``).
            var decision = Decision(kind: paused ? .paused : .heldElsewhere, at: at)
            decision.holder = state.strings.intern(holder)
            state.devices[device, default: DeviceState()].log.append(decision)
            if !paused { state.devices[device, default: DeviceState()].holder = holder }
        }
    }

    var neverBlocks: Bool { true }

    func accept(_ sequenced: SequencedRecord) throws(OutputError) {
        let record = sequenced.record
        // An entry of the device's own history is no tick of it: its last record and decisions stay the polls'.
        guard record.source != .history else { return }
        let at = wallTime(of: record.fired)
        let unhealthy = record.result == .failed ? unhealthyAdapters()[record.peripheral.adapter] != nil : false
        let passive = device(named: record.device)?.passive ?? false
        state.withLock { state in
            // The strings first, then the device's state changed in place: a copy of it (taken out of the
            // dictionary and put back) would copy its log too, a kilobyte allocated and freed per record.
            var healingStep: Decision?
            if let healing = sequenced.healing {
                var step = Decision(kind: .healing, at: wallTime(of: healing.at))
                step.code = state.strings.intern(healing.action.rawValue)
                step.adapter = state.strings.intern(healing.adapter)
                healingStep = step
            }
            let known = state.devices[record.device]
            var decision = Decision(kind: Self.kind(of: record), at: at)
            decision.power = record.power
            decision.intervalMilliseconds = Self.milliseconds(record.interval)
            decision.adapter = state.strings.intern(record.peripheral.adapter)
            if record.trigger == .command { decision.flags.insert(.command) }
            if record.result == .newData { decision.flags.insert(.newData) }
            if unhealthy { decision.flags.insert(.adapterUnhealthy) }
            if passive { decision.flags.insert(.passive) }
            switch decision.kind {
            case .failed:
                decision.code = state.strings.intern(record.failure?.code)
                decision.value = UInt32(clamping: record.attempts)
            case .backoff:
                // The board's own count, not the scheduler's: asking it (`KeepAlive.status(of:)`) at every backoff
                // record grew the soak's memory by ~0.9 MiB in 2 minutes, a cause not yet found. The next try is
                // said by `explain`'s `now`, from the scheduler, when asked.
                decision.value = UInt32(clamping: known?.failuresInRow ?? 0)
                decision.code = state.strings.intern(known?.lastFailureCode)
            case .noSlot:
                decision.value = Self.milliseconds(record.slotWait)
                decision.code = state.strings.intern(record.busy)  // a few names: what held the link
            case .polled:
                decision.value = Self.milliseconds(record.window?.used)
            default:
                break
            }
            decision.holder = state.strings.intern(record.holder?.gateway)
            if let handover = record.holder?.handover {
                let from = handover.from.map { "from \($0), " } ?? ""
                decision.handover = state.strings.intern(from + handover.reason)
            }
            Self.update(&state.devices[record.device, default: DeviceState()]) { device in
                if let healingStep { device.log.append(healingStep) }
                device.log.append(decision)
                device.records += 1
                device.last = LastRecord(
                    result: record.result, failure: record.failure, readings: record.readings,
                    trigger: record.trigger, sequence: sequenced.sequence, at: at, windowUsed: record.window?.used)
                if let wait = record.slotWait {
                    device.slotWait = wait
                    if wait > .zero { device.slotWaits += 1 }
                }
                if let link = record.link { device.link = link }
                if let holder = record.holder { device.holder = holder.gateway }
                if let heard = record.heard, heard.count > 0 {
                    device.heard = heard
                    device.heardAt = at
                }
                switch decision.kind {
                case .polled:
                    device.failuresInRow = 0
                case .failed:
                    device.failuresInRow += 1
                    device.lastFailureCode = record.failure?.code
                default:
                    break
                }
            }
        }
        recordObserver.withLock { $0 }?(sequenced)
    }

    /// Changes `device` in place (`state.devices[name, default:]` yields it without a copy).
    private static func update(_ device: inout DeviceState, _ body: (inout DeviceState) -> Void) {
        body(&device)
    }

    /// The decision a record stands for.
    static func kind(of record: PollRecord) -> Decision.Kind {
        if let reason = record.skipReason {
            switch reason {
            case .backoff: return .backoff
            case .overlap: return .overlap
            case .refused: return .closed
            }
        }
        if record.isNotHeard { return .notHeard }
        if record.isContention { return .noSlot }
        return record.result == .failed ? .failed : .polled
    }

    static func milliseconds(_ duration: Duration?) -> UInt32 {
        guard let duration, duration > .zero else { return 0 }
        return UInt32(clamping: duration.milliseconds)
    }

    // MARK: Reading

    /// A device's state and its decisions (oldest first) with the strings they name; `nil` for a device never
    /// configured.
    func snapshot(of device: String) -> (state: DeviceState, decisions: [Decision], strings: DecisionLog.Strings)? {
        guard indexByName[device] != nil else { return nil }
        return state.withLock { state in
            let device = state.devices[device] ?? DeviceState()
            return (device, device.log.decisions, state.strings)
        }
    }

    /// Every configured device's state, in configuration order.
    func states() -> [(Device, DeviceState)] {
        state.withLock { state in configured.map { ($0, state.devices[$0.name] ?? DeviceState()) } }
    }
}
