internal import BlueZ
internal import DBus
internal import KeepAlive
internal import Polling
internal import Basics
internal import Logging
internal import CoreMetrics

/// The healing ladder at work (issue #15): every record's signal goes into the pure ``HealingLadder``; what it
/// decides is logged with why, carried out on the bus (at most one action per adapter at a time, each bounded)
/// and, for an adapter given up on, shown in `STATUS=` and ``Daemon/status``.
final class AdapterHealer: Sendable {
    private let ladder: Locked<HealingLadder>
    private let transport: ReconnectingTransport
    /// The configured peripherals, by adapter (the stale links the ladder may drop are theirs only).
    private let peripherals: [String: [Peripheral]]
    private let status: StatusBoard
    private let notifier: SystemdNotifier?
    private let logger: Logger
    private let busy = Locked<Set<String>>([])
    /// Each configured adapter's address, learned while it works: how it is recognised under a new index.
    private let addresses = Locked<[String: String]>([:])
    /// The configured device names by adapter, and the healing step each device's next record should carry (so the
    /// records say when the ladder acted, and why, beside the failures that made it).
    private let devicesByAdapter: [String: Set<String>]
    private let notes = Locked<[String: HealingStep]>([:])
    /// Each step taken, by adapter and action (`keepalive_healing_actions_total`).
    private let metricsFactory: any MetricsFactory

    init(
        specs: [PeripheralSpec], policy: HealingPolicy, transport: ReconnectingTransport, status: StatusBoard,
        notifier: SystemdNotifier?, logger: Logger, metricsFactory: any MetricsFactory = NOOPMetricsHandler.instance
    ) {
        self.metricsFactory = metricsFactory
        var devices: [String: Set<String>] = [:]
        var peripherals: [String: [Peripheral]] = [:]
        for spec in specs {
            devices[spec.peripheral.adapter, default: []].insert(spec.name)
            peripherals[spec.peripheral.adapter, default: []].append(spec.peripheral)
        }
        ladder = Locked(HealingLadder(adapters: devices, policy: policy))
        devicesByAdapter = devices
        self.transport = transport
        self.peripherals = peripherals
        self.status = status
        self.notifier = notifier
        self.logger = logger
    }

    /// One record, as it is written: its signal may move the ladder.
    func observe(_ record: PollRecord) {
        let at = record.fired + (record.window?.used ?? .zero)
        let signal = AdapterSignal(record)
        if signal == .healthy { learnAddress(of: record.peripheral.adapter) }
        if signal == .adapterGone { follow(record.peripheral.adapter) }
        let steps = ladder.withLock { $0.observe(device: record.device, signal, at: at) }
        for step in steps { take(step) }
    }

    /// Remembers the address of the adapter now behind `configured`, once.
    private func learnAddress(of configured: String) {
        guard addresses.withLock({ $0[configured] }) == nil, let bluez = transport.current.withLock({ $0 }),
            let address = bluez.cache.adapter(named: transport.actual(configured))?.address
        else { return }
        addresses.withLock { $0[configured] = address }
    }

    /// `configured` is not on the bus: if an adapter with its address is, under another name (unplugged and back
    /// under a new index), calls follow it there. Records keep the configured name.
    private func follow(_ configured: String) {
        guard let address = addresses.withLock({ $0[configured] }), let bluez = transport.current.withLock({ $0 })
        else { return }
        let current = transport.actual(configured)
        guard bluez.cache.adapter(named: current) == nil,
            let found = bluez.cache.adapters().first(where: { $0.address == address && $0.name != current })
        else { return }
        transport.aliases.withLock { aliases in
            if found.name == configured { aliases[configured] = nil } else { aliases[configured] = found.name }
        }
        logger.notice(
            "adapter back under another name: following it",
            metadata: ["adapter": "\(configured)", "now": "\(found.name)", "address": "\(address)"])
    }

    /// The healing step to write into `device`'s next record, once: the latest one taken on its adapter since
    /// its last record.
    func note(for device: String) -> HealingStep? {
        notes.withLock { $0.removeValue(forKey: device) }
    }

    private func take(_ step: HealingStep) {
        let metadata: Logger.Metadata = ["adapter": "\(step.adapter)", "why": "\(step.why)"]
        // Rare: the registry hands back the same counter for the same labels.
        Counter(
            label: "keepalive_healing_actions_total",
            dimensions: [("adapter", step.adapter), ("action", step.action.rawValue)], factory: metricsFactory
        ).increment()
        notes.withLock { notes in
            for device in devicesByAdapter[step.adapter] ?? [] { notes[device] = step }
        }
        switch step.action {
        case .reportUnhealthy:
            logger.error("adapter unhealthy: the healing ladder stops here", metadata: metadata)
            status.withLock { $0.unhealthyAdapters[step.adapter] = step.why }
            Daemon.publish(status, to: notifier)
        case .reportRecovered:
            logger.notice("adapter healthy again", metadata: metadata)
            let changed = status.withLock { $0.unhealthyAdapters.removeValue(forKey: step.adapter) != nil }
            if changed { Daemon.publish(status, to: notifier) }
        case .clearStuck, .powerCycle, .powerOn, .restartBluetoothd:
            guard busy.withLock({ $0.insert(step.adapter).inserted }) else {
                logger.info(
                    "healing: an action on this adapter is still running; skipped",
                    metadata: metadata.merging(["action": "\(step.action.rawValue)"]) { $1 })
                return
            }
            logger.warning("healing: \(Self.describe(step.action))", metadata: metadata)
            Task {
                defer { _ = busy.withLock { $0.remove(step.adapter) } }
                do {
                    try await carryOut(step)
                    logger.notice("healing: \(step.action.rawValue) done", metadata: ["adapter": "\(step.adapter)"])
                } catch {
                    logger.warning(
                        "healing: \(step.action.rawValue) failed",
                        metadata: ["adapter": "\(step.adapter)", "error": "\(error)"])
                }
            }
        }
    }

    private func carryOut(_ step: HealingStep) async throws {
        guard let bluez = transport.current.withLock({ $0 }) else {
            throw TransportError(.serviceUnavailable, "the D-Bus system bus is gone; reconnecting")
        }
        let adapter = transport.actual(step.adapter)
        try await withTaskExecutorPreference(bluez.preferredExecutor) {
            switch step.action {
            case .clearStuck:
                let stopped = try await bluez.stopDiscovery(adapter: adapter)
                let stale = bluez.connectedPeripherals(
                    among: (peripherals[step.adapter] ?? []).map { Peripheral(address: $0.address, adapter: adapter) })
                for peripheral in stale { await bluez.disconnect(peripheral, timeout: .seconds(3)) }
                logger.info(
                    "healing: cleared",
                    metadata: [
                        "adapter": "\(step.adapter)", "discoveryStopped": "\(stopped)",
                        "linksDropped": "\(stale.map(\.address))",
                    ])
            case .powerCycle:
                try await bluez.powerCycle(adapter: adapter)
            case .powerOn:
                try await bluez.setPowered(true, adapter: adapter)
            case .restartBluetoothd:
                _ = try await bluez.busConnection.call(
                    destination: "org.freedesktop.systemd1", path: "/org/freedesktop/systemd1",
                    interface: "org.freedesktop.systemd1.Manager",
                    method: "RestartUnit", arguments: [.string("bluetooth.service"), .string("replace")],
                    timeout: .seconds(10))
            case .reportUnhealthy, .reportRecovered:
                break
            }
        }
    }

    private static func describe(_ action: HealingStep.Action) -> String {
        switch action {
        case .clearStuck: "stopping a stuck discovery and dropping stale links"
        case .powerCycle: "power-cycling the adapter (Powered off, on)"
        case .powerOn: "powering the adapter on"
        case .restartBluetoothd: "restarting bluetooth.service through systemd"
        case .reportUnhealthy, .reportRecovered: action.rawValue
        }
    }
}
