import Fleet
import KeepAlive
import Polling
import Basics
import Logging
import MQTT
import CoreMetrics

/// The fleet protocol (module Fleet, a pure state machine) bound to the world: its own MQTT connection (clean
/// session, the gateway's fleet status as last will), the boot-time clock, timers on the timerfd thread, the
/// shared devices' advertisements, and the poll engine's admission.
///
/// Every event goes through ``send(_:)``: under one lock the state machine handles it and its effects are queued
/// in order; publishes and subscriptions then go out one at a time, in that order, on the one connection (the
/// lease rule needs the broker to see a gateway's lease messages in the order it sent them). Received messages
/// are handed over in arrival order. See docs/FLEET.md ("The daemon's binding").
final class FleetBinding: PollAdmission, Sendable {
    let configuration: FleetConfiguration
    private let gateway: Locked<FleetGateway>
    /// Device name → fleet key (its address) for shared devices, and back.
    private let keys: [String: String]
    private let names: [String: String]
    private let client: MQTTClient
    private let clock = TimerFDClock()
    private let outbox: AsyncStream<FleetEffect>
    private let outboxContinuation: AsyncStream<FleetEffect>.Continuation
    private let timers = Locked<[FleetTimer: (generation: UInt64, task: Task<Void, Never>)]>([:])
    private let generations = Locked<UInt64>(0)
    private let scan: (every: Duration, for: Duration)
    private let logger: Logger
    /// Told when this gateway starts (true) or stops (false) holding a device, by name: the bridge announces the
    /// device to Home Assistant while it holds it.
    private let onHoldChange: @Sendable (String, Bool) -> Void
    /// Holds and their ends, by how and why (`keepalive_fleet_holds_total`, `keepalive_fleet_releases_total`),
    /// and the devices held now.
    private let metricsFactory: any MetricsFactory
    private let held: Meter

    /// - Parameter shared: the shared devices, by name and address.
    init(
        configuration: FleetConfiguration, mqtt: MQTTConfiguration, shared: [(name: String, address: String)],
        scan: (every: Duration, for: Duration), logger: Logger,
        onHoldChange: @escaping @Sendable (String, Bool) -> Void = { _, _ in },
        metricsFactory: any MetricsFactory = NOOPMetricsHandler.instance
    ) throws {
        self.metricsFactory = metricsFactory
        held = Meter(label: "keepalive_fleet_held_devices", dimensions: [], factory: metricsFactory)
        held.set(0)
        self.configuration = configuration
        var keys: [String: String] = [:]
        var names: [String: String] = [:]
        for device in shared {
            let key = device.address.uppercased()
            keys[device.name] = key
            names[key] = device.name
        }
        self.keys = keys
        self.names = names
        let now = FleetInstant(nanoseconds: clock.now.sinceBoot.nanoseconds)
        let gateway = FleetGateway(
            configuration: configuration, sharedDevices: shared.map { $0.address.uppercased() }, at: now)
        self.gateway = Locked(gateway)
        var connection = mqtt
        connection.clientID = mqtt.clientID + "-fleet"
        connection.cleanStart = true
        connection.sessionExpiryInterval = 0
        connection.threadName = "fleet"
        let will = gateway.will
        connection.will = MQTTConfiguration.Will(
            topic: will.topic, payload: will.payload, qos: .atLeastOnce, retain: will.retained)
        client = try MQTTClient(configuration: connection)
        (outbox, outboxContinuation) = AsyncStream<FleetEffect>.makeStream()
        self.scan = scan
        self.logger = logger
        self.onHoldChange = onHoldChange
    }

    private var now: FleetInstant { FleetInstant(nanoseconds: clock.now.sinceBoot.nanoseconds) }

    // MARK: PollAdmission

    func admit(_ device: String) -> PollAdmissionDecision {
        guard let key = keys[device] else { return .poll(nil) }
        let at = now
        guard let permit = gateway.withLock({ $0.permitPoll(key, at: at) }) else { return .decline }
        let handover = permit.handover.map { PollRecord.Holder.Handover(from: $0.from, reason: $0.reason.rawValue) }
        return .poll(PollRecord.Holder(gateway: permit.holder, adapter: permit.adapter, handover: handover))
    }

    func records(_ device: String) -> Bool {
        guard let key = keys[device] else { return true }
        return gateway.withLock { $0.hold(of: key) != nil }
    }

    /// A poll of a shared device ended: its success feeds the score the others compare against (a poll that found
    /// no connection slot says nothing about the device's reach).
    func pollCompleted(_ record: PollRecord) {
        guard record.holder != nil, !record.isContention, !record.isNotHeard, let key = keys[record.device] else {
            return
        }
        send(.pollCompleted(device: key, success: record.result != .failed))
    }

    /// Who holds each shared device as this gateway sees it (for `keepalive fleet` and the logs).
    func holder(of device: String) -> String? {
        guard let key = keys[device] else { return nil }
        return gateway.withLock { gateway in
            if gateway.hold(of: key) != nil { return gateway.configuration.gateway }
            if case .held(let holder, _)? = gateway.leaseView(of: key)?.state { return holder }
            return nil
        }
    }

    // MARK: Events and effects

    func send(_ event: FleetEvent) {
        let at = now
        let effects = gateway.withLock { gateway in
            let effects = gateway.handle(event, at: at)
            // Queued under the lock: the connection sees them in the order the state machine made them.
            for effect in effects {
                switch effect {
                case .publish, .subscribe: outboxContinuation.yield(effect)
                default: break
                }
            }
            return effects
        }
        for effect in effects { perform(effect) }
    }

    /// The effects that are not network traffic: timers and the log.
    private func perform(_ effect: FleetEffect) {
        switch effect {
        case .publish, .subscribe:
            break
        case .armTimer(let timer, let at):
            arm(timer, at: at)
        case .holdStarted(let key, let adapter, _, let handover):
            var metadata: Logger.Metadata = ["device": "\(names[key] ?? key)", "adapter": "\(adapter)"]
            if let handover {
                metadata["from"] = "\(handover.from ?? "unknown")"
                metadata["reason"] = "\(handover.reason.rawValue)"
            }
            logger.notice("fleet: holding a shared device", metadata: metadata)
            if let name = names[key] { onHoldChange(name, true) }
            held.increment()
            // Rare events: the registry hands back the same counter for the same labels.
            Counter(
                label: "keepalive_fleet_holds_total", dimensions: [("how", handover?.reason.rawValue ?? "claimed")],
                factory: metricsFactory
            ).increment()
        case .holdExtended:
            break
        case .adapterChanged(let key, let adapter):
            logger.notice(
                "fleet: a shared device moves to a better adapter",
                metadata: ["device": "\(names[key] ?? key)", "adapter": "\(adapter)"])
        case .holdEnded(let key, let reason):
            let why: String =
                switch reason {
                case .fenced:
                    """
                        no renewal came back in time (cut off from the broker?): stopped before the lease could run \
                        out for the others
                        """
                case .claimedBy(let other): "\(other) took it"
                case .released(let successor): "handed over\(successor.map { " to \($0)" } ?? "")"
                }
            logger.notice(
                "fleet: no longer holding a shared device",
                metadata: ["device": "\(names[key] ?? key)", "why": "\(why)"])
            if let name = names[key] { onHoldChange(name, false) }
            held.decrement()
            let ended =
                switch reason {
                case .fenced: "fenced"
                case .claimedBy: "claimed"
                case .released: "released"
                }
            Counter(label: "keepalive_fleet_releases_total", dimensions: [("why", ended)], factory: metricsFactory)
                .increment()
        case .diagnostic(let diagnostic):
            logger.warning("fleet: \(diagnostic)")
        }
    }

    /// (Re-)arms one timer on the timerfd thread; a re-armed or cancelled one never fires.
    private func arm(_ timer: FleetTimer, at deadline: FleetInstant) {
        let generation = generations.withLock { value in
            value += 1
            return value
        }
        let instant = TimerFDClock.Instant(sinceBoot: .nanoseconds(deadline.nanoseconds))
        let task = Task { [clock, timers] in
            do {
                try await clock.sleep(until: instant)
            } catch {
                return
            }
            let current = timers.withLock { $0[timer]?.generation == generation }
            if current { self.send(.timerFired(timer)) }
        }
        let previous = timers.withLock { timers in
            defer { timers[timer] = (generation, task) }
            return timers[timer]?.task
        }
        previous?.cancel()
    }

    // MARK: Running

    /// Connects (retrying with the client's backoff until it succeeds), follows the connection, delivers
    /// messages and effects, and listens for the shared devices, until cancelled; then hands the held devices
    /// over, says `offline` and disconnects (bounded by `stopWithin`).
    func run(transport: any PeripheralTransport, stopWithin: Duration = .seconds(3)) async {
        // Unstructured: it outlives the cancellation below, to send the releases and `offline`.
        let effects = Task { await self.deliverEffects() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.followEvents() }
            group.addTask { await self.deliverMessages() }
            group.addTask { await self.connect() }
            group.addTask { await self.listen(transport) }
            // Until cancelled (a far deadline on the timerfd thread: no wake-up before it).
            try? await clock.sleep(for: .seconds(1_000_000_000))
            group.cancelAll()
        }
        for timer in timers.withLock({ $0.values.map(\.task) }) { timer.cancel() }
        // Stopping: release what is held (the others take it at once, not a lease later), then `offline`.
        send(.stopping)
        outboxContinuation.finish()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await effects.value }
            group.addTask { [clock] in try? await clock.sleep(for: stopWithin) }
            await group.next()
            group.cancelAll()
        }
        effects.cancel()
        await client.close()
    }

    private func connect() async {
        var random = SystemRandomNumberGenerator()
        var attempt = 0
        while !Task.isCancelled {
            do {
                try await client.connect()
                return
            } catch {
                if error.code == .cancelled || error.code == .closed { return }
                let delay = client.configuration.reconnect.delay(beforeAttempt: attempt, using: &random)
                attempt += 1
                connectionFailed(error, retry: delay)
                do { try await clock.sleep(for: delay) } catch { return }
            }
        }
    }

    /// A failed connection attempt, the first connection's or a reconnection's, as one warning that reads the same
    /// every time, so that the daemon's log folds the repeats by broker and error class (as the bridge's; the
    /// summary goes out when `fleet: connected` names the broker).
    private func connectionFailed(_ error: MQTTError, retry: Duration) {
        logger.warning(
            "fleet: cannot connect to the MQTT broker; retrying",
            metadata: [
                "broker": "\(client.configuration.broker)", "error": "\(error)", "retry": "\(retry.compact)",
            ]
        )
    }

    private func followEvents() async {
        for await event in client.events {
            switch event {
            case .connected:
                logger.info("fleet: connected", metadata: ["broker": "\(client.configuration.broker)"])
                send(.connected)
            case .disconnected(let error):
                logger.warning(
                    "fleet: lost the MQTT broker; holds end at their fences", metadata: ["error": "\(error)"])
                send(.disconnected)
            case .connectFailed(let error, let retry):
                connectionFailed(error, retry: retry)
            }
        }
    }

    private func deliverMessages() async {
        for await message in client.messages {
            send(.received(topic: message.topic, payload: message.payload, retained: message.retain))
        }
    }

    private func deliverEffects() async {
        for await effect in outbox {
            do {
                switch effect {
                case .publish(let topic, let payload, let retained):
                    try await client.publish(topic: topic, payload: payload, qos: .atLeastOnce, retain: retained)
                case .subscribe(let filter):
                    try await client.subscribe(filter, qos: .atLeastOnce)
                default:
                    break
                }
            } catch {
                // Lost with the connection: the state machine re-sends what matters after the next CONNACK.
                logger.debug("fleet: not sent", metadata: ["effect": "\(effect)", "error": "\(error)"])
            }
        }
    }

    /// Listens for the shared devices' advertisements on each of the fleet's adapters now and then: their
    /// signal (smoothed) is what placement compares. A fresh reach report goes out after each listening.
    ///
    /// A listening that fails (bluetoothd not on the bus yet at start, an adapter still powering on) is tried
    /// again after 1 s, doubling up to `scan.every`, not a whole `scan.every` later: a gateway must hear its
    /// devices within seconds of start, or it holds none of them for a minute.
    private func listen(_ transport: any PeripheralTransport) async {
        let adapters = configuration.adapters.map(\.name)
        // Only the shared devices: a busy neighbourhood costs the transport a lookup per advertisement.
        let filter = DiscoveryFilter(addresses: Set(names.keys))
        var retry = Duration.seconds(1)
        while !Task.isCancelled {
            var failed = false
            let wait = retry
            for adapter in adapters {
                let ok = await withTaskGroup(of: Bool.self) { group in
                    group.addTask {
                        do {
                            for try await advertisement in transport.discover(on: adapter, filter: filter) {
                                // 127 is HCI's "RSSI not available" (btvirt reports it for everything): no signal.
                                guard let rssi = advertisement.rssi, rssi != 127,
                                    self.names[advertisement.peripheral.address] != nil
                                else { continue }
                                self.send(
                                    .observed(
                                        device: advertisement.peripheral.address, adapter: adapter, rssi: Int(rssi)))
                            }
                        } catch is CancellationError {
                        } catch {
                            self.logger.info(
                                "fleet: listening for advertisements failed; trying again",
                                metadata: ["adapter": "\(adapter)", "error": "\(error)", "in": "\(wait.compact)"])
                            return false
                        }
                        return true
                    }
                    group.addTask { [clock, scan] in
                        try? await clock.sleep(for: scan.for)
                        return true
                    }
                    let first = await group.next() ?? true
                    group.cancelAll()
                    return first
                }
                failed = failed || !ok
            }
            send(.timerFired(.reach))
            let pause = failed ? min(retry, scan.every - scan.for) : scan.every - scan.for
            retry = failed ? min(retry * 2, scan.every) : .seconds(1)
            do { try await clock.sleep(for: pause) } catch { return }
        }
    }

}
