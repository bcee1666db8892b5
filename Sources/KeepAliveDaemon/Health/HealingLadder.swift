public import KeepAlive

/// How far the daemon may go to heal an adapter (the configuration's `healing:` section).
public struct HealingPolicy: Sendable, Hashable {
    /// Act at all (`healing.enabled`); off, failures are only recorded, as before.
    public var enabled: Bool
    /// Failing rounds in a row before the next rung is tried (`healing.failing_rounds`).
    public var failingRounds: Int
    /// After an action, rounds that end within this long do not count (`healing.cooldown`): the adapter gets
    /// time to come back before the ladder judges it again.
    public var cooldown: Duration
    /// Power changes (power-cycles, and power-ons of an adapter found off) per adapter in any hour
    /// (`healing.max_power_cycles_per_hour`); past it the rung is skipped, never repeated.
    public var maxPowerCyclesPerHour: Int
    /// Restart bluetoothd through systemd (`healing.restart_bluetoothd`, off by default: it needs the polkit
    /// rule in `udev/`, and it drops every other client's links too).
    public var restartBluetoothd: Bool
    /// bluetoothd restarts in any hour (`healing.max_restarts_per_hour`).
    public var maxRestartsPerHour: Int
    /// After giving up on an adapter (unhealthy), start the ladder over this much later (`healing.retry_after`).
    public var retryAfter: Duration
    /// Power on an adapter found powered off (`adapter_power: on`).
    public var powerOn: Bool

    public init(
        enabled: Bool = true, failingRounds: Int = 3, cooldown: Duration = .seconds(60), maxPowerCyclesPerHour: Int = 3,
        restartBluetoothd: Bool = false,
        maxRestartsPerHour: Int = 1, retryAfter: Duration = .seconds(3_600), powerOn: Bool = false
    ) {
        self.enabled = enabled
        self.failingRounds = failingRounds
        self.cooldown = cooldown
        self.maxPowerCyclesPerHour = maxPowerCyclesPerHour
        self.restartBluetoothd = restartBluetoothd
        self.maxRestartsPerHour = maxRestartsPerHour
        self.retryAfter = retryAfter
        self.powerOn = powerOn
    }
}

/// One thing the ladder decided, with why: the daemon carries it out, logs it and shows it.
public struct HealingStep: Sendable, Hashable, CustomStringConvertible {
    public enum Action: String, Sendable, Hashable {
        /// Stop a discovery that is stuck and disconnect links the daemon did not make.
        case clearStuck
        /// `Adapter1.Powered` false, then true.
        case powerCycle
        /// `Adapter1.Powered` true (it was found off and `adapter_power: on`).
        case powerOn
        /// `RestartUnit("bluetooth.service")` through systemd.
        case restartBluetoothd
        /// Nothing more to try: reported in `STATUS=` (and by the daemon's ``Daemon/status``).
        case reportUnhealthy
        /// The first healthy round after any of the above.
        case reportRecovered
    }

    public var adapter: String
    public var action: Action
    public var why: String
    public var at: KeepAliveInstant

    public var description: String { "\(adapter): \(action.rawValue) (\(why))" }
}

/// The healing ladder of every adapter (issue #15), as a pure state machine: records' signals and their
/// instants in, ``HealingStep``s out; no clock, no I/O.
///
/// Each adapter climbs on its own: after ``HealingPolicy/failingRounds`` failing rounds (``AdapterHealth``) the
/// next rung is tried — clear what is stuck → power-cycle → restart bluetoothd (when allowed) → report
/// unhealthy and stop — each followed by a cooldown; a rung whose hourly bound is used up is skipped; a
/// healthy round resets the ladder and is reported. An adapter that is off, blocked, gone, or whose bluetoothd
/// is down, skips the rungs that cannot help. Given up on, it starts over after ``HealingPolicy/retryAfter``.
///
/// ```swift
/// var ladder = HealingLadder(adapters: ["hci0": ["sensor-1", "sensor-2"]], policy: HealingPolicy())
/// for step in ladder.observe(device: record.device, AdapterSignal(record), at: record.fired) { carryOut(step) }
/// ```
public struct HealingLadder: Sendable, Hashable {
    public enum Rung: Int, Sendable, Hashable, Comparable {
        case watching, clearedStuck, powerCycled, restartedBluetoothd, unhealthy

        public static func < (lhs: Rung, rhs: Rung) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    struct AdapterState: Sendable, Hashable {
        var health: AdapterHealth
        var rung: Rung = .watching
        var cooldownUntil: KeepAliveInstant?
        var unhealthySince: KeepAliveInstant?
        var unhealthyWhy: String?
        var powerChanges: [KeepAliveInstant] = []
        var restarts: [KeepAliveInstant] = []
        /// An action was taken since the last healthy round (so the next healthy one is reported).
        var acted = false
    }

    public let policy: HealingPolicy
    private var adapters: [String: AdapterState]
    private var adapterOfDevice: [String: String]

    /// `devices`: each adapter's devices (by the names in records).
    public init(adapters devices: [String: Set<String>], policy: HealingPolicy) {
        self.policy = policy
        adapters = devices.mapValues { AdapterState(health: AdapterHealth(adapter: "", devices: $0)) }
        for (adapter, names) in devices {
            adapters[adapter]?.health = AdapterHealth(adapter: adapter, devices: names)
        }
        adapterOfDevice = [:]
        for (adapter, names) in devices {
            for name in names { adapterOfDevice[name] = adapter }
        }
    }

    /// Where `adapter`'s ladder stands.
    public func rung(of adapter: String) -> Rung? { adapters[adapter]?.rung }

    /// The adapters given up on, with why.
    public var unhealthy: [String: String] {
        adapters.compactMapValues { $0.rung == .unhealthy ? $0.unhealthyWhy ?? "unhealthy" : nil }
    }

    /// Power changes of `adapter` in the hour before `now` (the bound's count).
    public func powerChanges(of adapter: String, inHourBefore now: KeepAliveInstant) -> Int {
        adapters[adapter]?.powerChanges.filter { now.duration(to: $0) > .seconds(-3_600) }.count ?? 0
    }

    /// One record's signal, at the instant it was taken; returns what to do now (usually nothing).
    public mutating func observe(device: String, _ signal: AdapterSignal, at now: KeepAliveInstant) -> [HealingStep] {
        // Taken out of the dictionary, not copied: a copy shared the round's storage, so the round's update
        // copied its 10,000 entries on every record.
        guard let adapter = adapterOfDevice[device], var state = adapters.removeValue(forKey: adapter) else {
            return []
        }
        defer { adapters[adapter] = state }
        var steps: [HealingStep] = []
        // Found off and allowed to power it on: at once, not after a round (polling resumes by the next tick).
        if signal == .poweredOff, policy.powerOn, state.cooldownUntil.map({ now >= $0 }) ?? true {
            if Self.within(&state.powerChanges, max: policy.maxPowerCyclesPerHour, now: now) {
                state.powerChanges.append(now)
                state.cooldownUntil = now + policy.cooldown
                state.acted = true
                state.health.restartRound()
                return [
                    HealingStep(
                        adapter: adapter, action: .powerOn,
                        why: "\(device): the adapter is powered off and adapter_power is on", at: now)
                ]
            }
        }
        guard let verdict = state.health.observe(device: device, signal) else { return [] }
        switch verdict {
        case .silent:
            return []
        case .healthy:
            if state.acted || state.rung != .watching {
                steps.append(
                    HealingStep(
                        adapter: adapter, action: .reportRecovered,
                        why: "first healthy round after \(Self.describe(state.rung, acted: state.acted))", at: now))
            }
            state.rung = .watching
            state.acted = false
            state.cooldownUntil = nil
            state.unhealthySince = nil
            state.unhealthyWhy = nil
            return steps
        case .failing(let signals):
            if let until = state.cooldownUntil, now < until {
                state.health.resetFailures()
                return []
            }
            if state.rung == .unhealthy {
                guard let since = state.unhealthySince, since.duration(to: now) >= policy.retryAfter else {
                    state.health.resetFailures()
                    return []
                }
                state.rung = .watching  // given up long enough ago: climb again from the bottom
            }
            guard state.health.consecutiveFailingRounds >= policy.failingRounds else { return [] }
            let rounds = state.health.consecutiveFailingRounds
            state.health.resetFailures()
            let why =
                "\(rounds) failing rounds in a row ("
                + signals.keys.sorted().map { "\($0) ×\(signals[$0] ?? 0)" }.joined(separator: ", ") + ")"
            steps.append(climb(&state, adapter: adapter, signals: Set(signals.keys), why: why, at: now))
            return steps
        }
    }

    /// The next rung that can help, skipping those that cannot or whose hourly bound is used up.
    private func climb(
        _ state: inout AdapterState, adapter: String, signals: Set<String>, why: String, at now: KeepAliveInstant
    ) -> HealingStep {
        func giveUp(_ reason: String) -> HealingStep {
            state.rung = .unhealthy
            state.unhealthySince = now
            state.unhealthyWhy = reason
            return HealingStep(adapter: adapter, action: .reportUnhealthy, why: reason, at: now)
        }
        func act(_ rung: Rung, _ action: HealingStep.Action, _ note: String = "") -> HealingStep {
            state.rung = rung
            state.acted = true
            state.cooldownUntil = now + policy.cooldown
            state.health.restartRound()
            return HealingStep(adapter: adapter, action: action, why: why + note, at: now)
        }
        let restartAllowed =
            policy.restartBluetoothd && Self.within(&state.restarts, max: policy.maxRestartsPerHour, now: now)
        // Causes no rung of ours can fix on the adapter itself.
        if signals == ["rfkillBlocked"] { return giveUp(why + ": rfkill-blocked, run `rfkill unblock bluetooth`") }
        if signals == ["adapterGone"] { return giveUp(why + ": the adapter is not on the bus (unplugged?)") }
        if signals == ["poweredOff"], !policy.powerOn {
            return giveUp(why + ": powered off (`adapter_power: on` would power it on)")
        }
        if signals == ["bluetoothdDown"] {
            guard restartAllowed, state.rung < .restartedBluetoothd else {
                return giveUp(
                    why
                        + (policy.restartBluetoothd
                            ? ": bluetoothd restarts used up"
                            : ": bluetoothd is down (healing.restart_bluetoothd is off)"))
            }
            state.restarts.append(now)
            return act(.restartedBluetoothd, .restartBluetoothd)
        }
        var next = Rung(rawValue: state.rung.rawValue + 1) ?? .unhealthy
        var skipped: [String] = []
        while true {
            switch next {
            case .watching:
                next = .clearedStuck
            case .clearedStuck:
                return act(.clearedStuck, .clearStuck)
            case .powerCycled:
                if Self.within(&state.powerChanges, max: policy.maxPowerCyclesPerHour, now: now) {
                    state.powerChanges.append(now)
                    return act(.powerCycled, .powerCycle, skipped.isEmpty ? "" : "; " + skipped.joined(separator: "; "))
                }
                skipped.append(
                    "power-cycle skipped: \(policy.maxPowerCyclesPerHour) power changes in the last hour already")
                next = .restartedBluetoothd
            case .restartedBluetoothd:
                if restartAllowed {
                    state.restarts.append(now)
                    return act(
                        .restartedBluetoothd, .restartBluetoothd,
                        skipped.isEmpty ? "" : "; " + skipped.joined(separator: "; "))
                }
                if policy.restartBluetoothd {
                    skipped.append("bluetoothd restart skipped: \(policy.maxRestartsPerHour) in the last hour already")
                }
                next = .unhealthy
            case .unhealthy:
                return giveUp(([why] + skipped + ["every rung tried"]).joined(separator: "; "))
            }
        }
    }

    /// Whether one more event fits in the hourly bound (and forgets events older than an hour).
    private static func within(_ events: inout [KeepAliveInstant], max: Int, now: KeepAliveInstant) -> Bool {
        events.removeAll { $0.duration(to: now) >= .seconds(3_600) }
        return events.count < max
    }

    private static func describe(_ rung: Rung, acted: Bool) -> String {
        switch rung {
        case .watching: acted ? "powering the adapter on" : "failures"
        case .clearedStuck: "clearing what was stuck"
        case .powerCycled: "a power-cycle"
        case .restartedBluetoothd: "restarting bluetoothd"
        case .unhealthy: "being reported unhealthy"
        }
    }
}
