/// The fleet protocol for one gateway, as a pure value: events in, effects out, no I/O and no clock of its own.
///
/// The binding (MQTT client + the daemon's scheduler) must:
/// 1. connect with ``will`` as the last will and a clean session, then send ``FleetEvent/connected``;
/// 2. perform every returned ``FleetEffect`` in order (publishes with QoS 1 on that one connection; subscriptions
///    must not set MQTT 5's "no local": a gateway has to see its own lease messages come back);
/// 3. deliver every PUBLISH of the subscribed topics in the order received, with its RETAIN flag;
/// 4. fire armed timers, and pass the same monotonic `CLOCK_BOOTTIME` reading with every event;
/// 5. poll a device only between ``FleetEffect/holdStarted(device:adapter:until:handover:)`` and
///    ``FleetEffect/holdEnded(device:reason:)``, asking ``permitPoll(_:at:)`` right before each poll (it checks
///    the fence, so a late timer cannot stretch a hold).
///
/// Devices configured on this gateway only never enter the fleet: they are polled as before, without a broker.
public struct FleetGateway: Sendable {
    public let configuration: FleetConfiguration
    public private(set) var isConnected = false
    var devices: [String: SharedDevice] = [:]
    /// Device names in a fixed order, so effects come out in the same order on every run (deterministic).
    let deviceOrder: [String]
    var nextSequence: UInt64 = 0
    var statuses: [String: GatewayStatus] = [:]
    var heldPerAdapter: [String: Int] = [:]
    var stopped = false

    /// - Parameter sharedDevices: the devices this gateway may poll that are also configured elsewhere.
    ///   Names must be valid topic levels (``FleetTopics/isValidName(_:)``); invalid ones are dropped, and
    ///   ``rejectedDevices`` lists them.
    public init(configuration: FleetConfiguration, sharedDevices: [String], at now: FleetInstant) {
        self.configuration = configuration
        var order: [String] = []
        var rejected: [String] = []
        for device in sharedDevices {
            guard FleetTopics.isValidName(device) else {
                rejected.append(device)
                continue
            }
            guard devices[device] == nil else { continue }
            devices[device] = SharedDevice(connectedAt: now, leaseNanoseconds: configuration.leaseNanoseconds)
            order.append(device)
        }
        deviceOrder = order
        rejectedDevices = rejected
    }

    public let rejectedDevices: [String]

    /// The last will to connect with: `offline` on the status topic, retained.
    public var will: (topic: String, payload: [UInt8], retained: Bool) {
        (configuration.topics.status(of: configuration.gateway), Array(GatewayStatus.offline.rawValue.utf8), true)
    }

    /// The hold on `device`, if this gateway holds it: the adapter and the fence.
    public func hold(of device: String) -> (adapter: String, until: FleetInstant)? {
        guard let state = devices[device], state.isHolding, let adapter = state.adapter, let fence = state.fence
        else { return nil }
        return (adapter, fence)
    }

    /// This gateway's view of a device's lease topic (for status displays and tests).
    public func leaseView(of device: String) -> LeaseView? { devices[device]?.view }

    /// Permission to start one poll of `device` now, or nil. The first permit after taking the device carries the
    /// handover for the record; later ones do not.
    public mutating func permitPoll(_ device: String, at now: FleetInstant) -> PollPermit? {
        guard var state = devices[device], state.isHolding, let adapter = state.adapter, let fence = state.fence,
            now + configuration.pollDeadlineNanoseconds <= fence
        else { return nil }
        let handover = state.pendingHandover
        state.pendingHandover = nil
        devices[device] = state
        return PollPermit(device: device, holder: configuration.gateway, adapter: adapter, handover: handover)
    }

    public mutating func handle(_ event: FleetEvent, at now: FleetInstant) -> [FleetEffect] {
        var effects: [FleetEffect] = []
        switch event {
        case .connected: connect(at: now, into: &effects)
        case .disconnected: disconnect(at: now, into: &effects)
        case .received(let topic, let payload, let retained):
            receive(topic: topic, payload: payload, retained: retained, at: now, into: &effects)
        case .timerFired(.reach):
            publishReach(at: now, into: &effects)
            effects.append(.armTimer(.reach, at: now + configuration.reachPeriodNanoseconds))
        case .timerFired(.device(let device)):
            guard devices[device] != nil else { break }
            devices[device]?.armedDeadline = nil
            evaluate(device, at: now, into: &effects)
        case .observed(let device, let adapter, let rssi):
            observe(device: device, adapter: adapter, rssi: rssi, at: now, into: &effects)
        case .pollCompleted(let device, let success):
            guard let current = devices[device]?.successPermille else { break }
            // Smoothed by an eighth per poll: a single failure costs a few dB of score, a run of them a lot.
            devices[device]?.successPermille = current + ((success ? 1000 : 0) - current) / 8
            evaluate(device, at: now, into: &effects)
        case .stopping: stop(at: now, into: &effects)
        }
        return effects
    }

    private mutating func connect(at now: FleetInstant, into effects: inout [FleetEffect]) {
        isConnected = true
        let topics = configuration.topics
        effects.append(.subscribe(filter: topics.allStatuses))
        for device in deviceOrder {
            effects.append(.subscribe(filter: topics.lease(of: device)))
            effects.append(.subscribe(filter: topics.allReach(of: device)))
            devices[device]?.view.reconnect(at: now, leaseNanoseconds: configuration.leaseNanoseconds)
            devices[device]?.sentAt = [:]
            switch devices[device]?.role {
            case .claiming?, .releasing?: devices[device]?.role = .observing
            default: break
            }
        }
        effects.append(
            .publish(
                topic: topics.status(of: configuration.gateway), payload: Array(GatewayStatus.online.rawValue.utf8),
                retained: true))
        let description = GatewayDescription(
            gateway: configuration.gateway, version: configuration.version, adapters: configuration.adapters)
        effects.append(
            .publish(
                topic: topics.description(of: configuration.gateway), payload: description.encoded(), retained: true))
        publishReach(at: now, into: &effects)
        effects.append(.armTimer(.reach, at: now + configuration.reachPeriodNanoseconds))
        for device in deviceOrder { evaluate(device, at: now, into: &effects) }
    }

    private mutating func disconnect(at now: FleetInstant, into effects: inout [FleetEffect]) {
        isConnected = false
        for device in deviceOrder {
            switch devices[device]?.role {
            case .claiming?, .releasing?: devices[device]?.role = .observing
            default: break
            }
            devices[device]?.sentAt = [:]
            evaluate(device, at: now, into: &effects)
        }
    }

    private mutating func stop(at now: FleetInstant, into effects: inout [FleetEffect]) {
        stopped = true
        for device in deviceOrder where devices[device]?.isHolding == true {
            let successor = bestChallenger(for: device, at: now)?.name
            release(device, to: successor, at: now, into: &effects)
        }
        if isConnected {
            effects.append(
                .publish(
                    topic: configuration.topics.status(of: configuration.gateway),
                    payload: Array(GatewayStatus.offline.rawValue.utf8), retained: true))
        }
    }

    private mutating func receive(
        topic: String, payload: [UInt8], retained: Bool, at now: FleetInstant, into effects: inout [FleetEffect]
    ) {
        guard let parsed = configuration.topics.parse(topic) else {
            effects.append(.diagnostic(.unknownTopic(topic)))
            return
        }
        switch parsed {
        case .status(let gateway):
            guard let status = GatewayStatus(rawValue: String(decoding: payload, as: UTF8.self)) else {
                effects.append(.diagnostic(.malformed(topic: topic, .invalidField("status"))))
                return
            }
            statuses[gateway] = status
        case .description:
            // Kept by the broker for displays and the doctor; placement needs only the reach reports.
            break
        case .lease(let device):
            guard devices[device] != nil else {
                effects.append(.diagnostic(.unknownDevice(device)))
                return
            }
            do {
                let message = try LeaseMessage(decoding: payload)
                applyLease(message, device: device, retained: retained, at: now, into: &effects)
            } catch {
                effects.append(.diagnostic(.malformed(topic: topic, error)))
            }
        case .reach(let device, let gateway):
            guard devices[device] != nil else {
                effects.append(.diagnostic(.unknownDevice(device)))
                return
            }
            do {
                let report = try ReachReport(decoding: payload)
                guard report.gateway == gateway else {
                    effects.append(.diagnostic(.mismatchedGateway(topic: topic)))
                    return
                }
                guard gateway != configuration.gateway else { return }
                devices[device]?.reports[gateway] = SharedDevice.ReceivedReport(report: report, at: now)
                evaluate(device, at: now, into: &effects)
            } catch {
                effects.append(.diagnostic(.malformed(topic: topic, error)))
            }
        }
    }

    /// The next sequence number of this incarnation.
    mutating func nextMessageID() -> FleetMessageID {
        nextSequence += 1
        return FleetMessageID(
            gateway: configuration.gateway, incarnation: configuration.incarnation, sequence: nextSequence)
    }
}
