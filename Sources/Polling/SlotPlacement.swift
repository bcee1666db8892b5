import KeepAlive
import Logging
import Basics

/// The engine's side of slot-aware placement: it learns how long each device's polls hold a connection slot,
/// notices what changes a plan (a learned hold that moved, an interval that changed with power or a command, a
/// device another gateway took or gave back), and redoes the adapter's plan (``SlotPlanner``) when it must, at
/// most once per half of its shortest interval. The first plan waits for every device's first report: they all
/// fire at start, so it is made on measured holds, and applies from their second tick.
///
/// Per poll it costs one lock and a comparison; the plan itself is made only when something changed.
final class SlotPlacement: Sendable {
    /// Holds remembered per device: the expected hold is the 90th percentile of these.
    static let samples = 16

    struct Device {
        let key: String
        let token: RegistrationToken
        let adapter: String
        var interval: Duration
        /// Before the first hold is learned: the window's budget.
        let budget: Duration
        var holds: [Duration] = []
        var nextSample = 0
        var learned = 0
        /// The 90th percentile of `holds`, kept up to date as they come (`nil` before any).
        var measured: Duration?
        /// The hold the last plan used, and the phase it gave.
        var planned: Duration?
        var phase: Duration?
        /// False while another gateway holds the device: its ticks take no slot here.
        var active = true
        /// A tick of it has been reported: the first plan waits for every device's first (they all fire at start).
        var reported = false

        /// Keeps a hold; true when the expected hold moved away from the one the plan used (a longer hold at once:
        /// it collides; a shorter one when a round of samples says so).
        mutating func learn(_ hold: Duration) -> Bool {
            if holds.count < SlotPlacement.samples {
                holds.append(hold)
            } else {
                holds[nextSample] = hold
            }
            nextSample = (nextSample + 1) % SlotPlacement.samples
            learned += 1
            // Sorting 16 samples is done while they fill, once per round of them after, and when a hold is longer
            // than the percentile (it may raise it): not per poll in the steady state.
            if learned <= SlotPlacement.samples || learned % SlotPlacement.samples == 0 || hold > measured ?? .zero {
                let sorted = holds.sorted()
                measured = sorted[min(sorted.count - 1, (sorted.count * 9 + 9) / 10 - 1)]
            }
            guard let planned else { return false }
            let margin = max(planned / 4, .milliseconds(250))
            if hold > planned + margin { return true }
            guard learned == 1 || learned % SlotPlacement.samples == 0 else { return false }
            let expected = expectedHold
            return expected > planned + margin || expected + margin < planned
        }

        /// A high percentile of the recent holds; the budget before any.
        var expectedHold: Duration {
            measured ?? budget
        }
    }

    struct Adapter {
        var devices: [String] = []
        var dirty = true
        var plannedAt: KeepAliveInstant?
        var fits: Bool?
    }

    struct State {
        var devices: [String: Device] = [:]
        var adapters: [String: Adapter] = [:]
    }

    let slots: Int
    /// Added to every hold: a tick fires up to this late.
    let jitter: Duration
    let logger: Logger
    private let state: Locked<State>

    init(slots: Int, jitter: Duration, logger: Logger) {
        self.slots = slots
        self.jitter = jitter
        self.logger = logger
        self.state = Locked(State())
    }

    /// Adds a device (at the engine's start).
    func add(key: String, token: RegistrationToken, adapter: String, interval: Duration, budget: Duration) {
        state.withLock { state in
            state.devices[key] = Device(key: key, token: token, adapter: adapter, interval: interval, budget: budget)
            state.adapters[adapter, default: Adapter()].devices.append(key)
        }
    }

    /// A poll of `key` gave its slot back after holding it for `hold`.
    func learn(_ key: String, hold: Duration) {
        state.withLock { state in
            // In place: a copy of the device out of the dictionary would copy its samples on the write.
            guard let moved = state.devices[key]?.learn(hold) else { return }
            if moved, let adapter = state.devices[key]?.adapter { state.adapters[adapter]?.dirty = true }
        }
    }

    /// A scheduled tick of `key` at `interval` (effective) was admitted (`active`) or declined.
    func observe(_ key: String, interval: Duration, active: Bool) {
        state.withLock { state in
            guard var device = state.devices[key],
                device.interval != interval || device.active != active || !device.reported
            else { return }
            device.interval = interval
            device.active = active
            device.reported = true
            state.devices[key] = device
            state.adapters[device.adapter]?.dirty = true
        }
    }

    /// The adapters whose plan must be redone, redone: the phases to apply (empty when nothing is due).
    func replanIfDue(at now: KeepAliveInstant) -> [(token: RegistrationToken, phase: Duration)] {
        var changes: [(token: RegistrationToken, phase: Duration)] = []
        var verdicts: [(adapter: String, plan: SlotPlanner.Plan, devices: Int, changed: Bool, learned: Bool)] = []
        state.withLock { state in
            for (name, adapter) in state.adapters where adapter.dirty {
                let keys = adapter.devices.filter { state.devices[$0]?.active ?? false }
                // Every device fires at start: the first plan is made once each has reported that first tick,
                // on what its poll measured (the budget for a device whose poll held no slot).
                guard keys.allSatisfy({ state.devices[$0]?.reported ?? false }) else { continue }
                let shortest = keys.compactMap { state.devices[$0]?.interval }.min() ?? .seconds(1)
                if let plannedAt = adapter.plannedAt, plannedAt.duration(to: now) < shortest / 2 { continue }
                let planned = keys.compactMap { key in state.devices[key] }.map { device in
                    SlotPlanner.Device(
                        key: device.key, interval: device.interval, hold: device.expectedHold + jitter,
                        current: device.phase.map { phase in Self.within(phase, device.interval) })
                }
                let plan = SlotPlanner.plan(planned, slots: slots)
                for key in keys {
                    guard var device = state.devices[key], let phase = plan.phases[key] else { continue }
                    device.planned = device.expectedHold
                    if device.phase.map({ Self.within($0, device.interval) }) != phase {
                        device.phase = phase
                        changes.append((device.token, phase))
                    }
                    state.devices[key] = device
                }
                state.adapters[name]!.dirty = false
                state.adapters[name]!.plannedAt = now
                // A plan made on budgets (nothing learned yet) is a first guess: its verdict is not said.
                let learned = keys.allSatisfy { (state.devices[$0]?.learned ?? 0) > 0 }
                let changed = learned && state.adapters[name]!.fits != plan.fits
                if learned { state.adapters[name]!.fits = plan.fits }
                verdicts.append((name, plan, keys.count, changed, learned))
            }
        }
        for (adapter, plan, devices, changed, learned) in verdicts {
            let metadata: Logger.Metadata = [
                "adapter": "\(adapter)", "devices": "\(devices)", "slots": "\(plan.slots)",
                "load": "\(Self.rounded(plan.load))", "peak": "\(plan.peak)", "learned": "\(learned)",
            ]
            switch (plan.fits, changed) {
            case (false, true):
                logger.notice(
                    """
                    connection slots overbooked: the devices need more links at once than the adapter has; polls \
                    wait for a slot, shared fairly (slot_wait_ms)
                    """,
                    metadata: metadata)
            case (true, true):
                logger.info("devices placed within the adapter's connection slots", metadata: metadata)
            default:
                logger.debug("placement redone", metadata: metadata)
            }
        }
        return changes
    }

    /// The phases now in force, by device (for tests).
    func phases() -> [String: Duration] {
        state.withLock { state in state.devices.compactMapValues(\.phase) }
    }

    private static func within(_ phase: Duration, _ interval: Duration) -> Duration {
        let remainder = phase.attoseconds % interval.attoseconds
        return Duration(attoseconds: remainder)
    }

    private static func rounded(_ value: Double) -> String {
        let hundredths = Int((value * 100).rounded())
        return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
    }
}
