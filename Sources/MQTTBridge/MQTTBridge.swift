import KeepAlive
import Basics
public import Logging
import MQTT
import CoreMetrics
public import Readings
public import ServiceLifecycle

/// Publishes poll records over MQTT, takes commands, announces devices to Home Assistant, and never loses a
/// record to a broker that is away: a `Service` for the daemon's service group.
///
/// - ``submit(device:sequence:succeeded:readings:payload:)`` appends the record to the on-disk ``Spool`` before
///   it returns (synchronous, safe from any thread); ``run()`` delivers the spool in order with QoS 1 whenever
///   connected, and removes what the broker acknowledged. Delivery is at least once: after a reconnection or a
///   crash a record may arrive twice; subscribers de-duplicate by the record's `seq` (with `ts`, since `seq`
///   restarts with the daemon).
/// - ``run()`` connects (retrying with ``MQTTReconnectPolicy``'s backoff until it succeeds; afterwards the
///   client reconnects by itself), and on every connection publishes `online`, subscribes to the commands and
///   HA's status, clears and publishes discovery, and republishes the retained device topics. At graceful
///   shutdown it publishes `offline` and disconnects (the will says `offline` when it cannot).
/// - ``commands`` yields the commands received, parsed; malformed ones are answered on an error topic.
///
/// ```swift
/// let bridge = try MQTTBridge(configuration: configuration, devices: devices, logger: logger)
/// let group = ServiceGroup(services: [engine, bridge], logger: logger)
/// // in the engine's record callback, after encoding the JSON line:
/// try bridge.submit(device: record.device, sequence: seq, succeeded: record.result != .failed,
///                   readings: record.readings, payload: Array(line.utf8))
/// ```
public final class MQTTBridge: Service, Sendable {
    public let configuration: BridgeConfiguration
    /// The commands received over MQTT, in arrival order; one consumer; finishes when ``run()`` ends.
    public let commands: AsyncStream<BridgeCommand>
    let logger: Logger
    let topics: BridgeTopics
    let discovery: DiscoveryPayloads
    let spool: Locked<Spool>
    let state: Locked<BridgeState>
    let commandContinuation: AsyncStream<BridgeCommand>.Continuation
    let wakeups: AsyncStream<Void>
    let wakeupContinuation: AsyncStream<Void>.Continuation
    /// When the records of this process were spooled, until acknowledged (``oldestPendingAge``, the delivery
    /// latency).
    let deliveryTimes = Locked(DeliveryTimes(started: .now))
    let deliveryTimer: Timer
    /// Told each time the connection to the broker comes or goes (``onConnectionChange(_:)``).
    let connectionObservers = Locked<[@Sendable (Bool) -> Void]>([])

    /// Opens (or creates) the spool and the discovery state file; connects to nothing (``run()`` does).
    ///
    /// - Throws: ``BridgeError`` `.spool` when the directory or its files cannot be created or read;
    ///   `.invalidConfiguration` when two devices share a topic level (names equal after sanitising) or an
    ///   address.
    public init(configuration: BridgeConfiguration, devices: [BridgeDevice], logger: Logger) throws(BridgeError) {
        var configuration = configuration
        let topics = BridgeTopics(prefix: configuration.topicPrefix, gateway: configuration.gateway)
        // A persistent session: commands sent while the bridge is away wait for it at the broker.
        configuration.mqtt.cleanStart = false
        configuration.mqtt.will = MQTTConfiguration.Will(
            topic: topics.status, payload: Array("offline".utf8), qos: configuration.qos, retain: true)
        self.configuration = configuration
        self.logger = logger
        self.topics = topics
        deliveryTimer = Timer(label: "keepalive_mqtt_delivery_seconds", factory: configuration.metricsFactory)
        discovery = DiscoveryPayloads(
            discoveryPrefix: configuration.discoveryPrefix, topics: topics, gateway: configuration.gateway)
        let spool = try Spool(
            directory: configuration.spoolDirectory, limit: configuration.spoolLimitBytes,
            syncPolicy: configuration.syncPolicy)
        self.spool = Locked(spool)
        var state = BridgeState()
        let stateFile = configuration.spoolDirectory + "/" + AnnouncedState.fileName
        state.announced = (try SpoolFiles.readFile(stateFile)).map(AnnouncedState.init(parsing:)) ?? AnnouncedState()
        // By Home Assistant identity (from the address): one lookup per device (a scan of the devices so far made
        // this quadratic: 0.8 s for 1,000 devices).
        var deviceByIdentity: [String: String] = [:]
        for device in devices {
            // Two devices on one topic level, or one HA identity, would mix their records and entities.
            if let other = state.deviceByLevel[BridgeTopics.level(device.name)] {
                throw BridgeError(
                    code: .invalidConfiguration,
                    message:
                        """
                        devices \"\(other)\" and \"\(device.name)\" share the topic level \
                        \"\(BridgeTopics.level(device.name))\"
                        """
                )
            }
            let identity = DiscoveryPayloads.addressIdentifier(device.address)
            if let other = deviceByIdentity[identity] {
                throw BridgeError(
                    code: .invalidConfiguration,
                    message: "devices \"\(other)\" and \"\(device.name)\" have the same address \(device.address)"
                )
            }
            deviceByIdentity[identity] = device.name
            var readings = device.expectedReadings
            for seen in state.announced.readings[device.address, default: []]
            where !readings.contains(where: { $0.name == seen.name }) {
                readings.append(seen)
            }
            state.devices[device.name] = BridgeState.DeviceState(
                device: device, availability: AvailabilityTracker(threshold: configuration.availabilityThreshold),
                interval: device.interval, readings: readings,
                passive: device.passive || state.announced.passive.contains(device.address))
            state.deviceByLevel[BridgeTopics.level(device.name)] = device.name
        }
        let configured = Set(devices.map(\.address))
        state.announced.readings = state.announced.readings.filter { configured.contains($0.key) }
        state.announced.passive = state.announced.passive.filter { configured.contains($0) }
        self.state = Locked(state)
        (commands, commandContinuation) = AsyncStream<BridgeCommand>.makeStream()
        (wakeups, wakeupContinuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        if spool.acknowledgedMarkLost {
            logger.error(
                "the spool's acknowledged mark was damaged in both copies; every record on disk is sent again",
                metadata: ["directory": "\(configuration.spoolDirectory)"])
        }
        for run in spool.damage {
            logger.error(
                "damaged spool records skipped",
                metadata: [
                    "segment": "\(run.segment)", "offset": "\(run.offset)", "bytes": "\(run.size)",
                    "lost": run.exact ? "\(run.lost)" : "at least \(run.lost)",
                    "directory": "\(configuration.spoolDirectory)",
                ])
        }
        if spool.pendingCount > 0 || spool.corrupt > 0 {
            logger.notice(
                "spool opened with records to deliver",
                metadata: [
                    "pending": "\(spool.pendingCount)", "corrupt": "\(spool.corrupt)",
                    "directory": "\(configuration.spoolDirectory)",
                ])
        }
    }

    /// Appends one poll record to the spool and returns once it is there (written, and synced per
    /// ``BridgeConfiguration/syncPolicy``); ``run()`` publishes it to `<prefix>/<gateway>/<device>/state`, from
    /// the moment it is written: the sync proceeds beside the publish (the broker may have the record before
    /// this returns).
    ///
    /// Also updates the device's availability (`succeeded`; `nil` for a record that says nothing about the device,
    /// a poll that found no free connection slot), announces a sensor for each reading name seen for
    /// the first time, and takes `manufacturer`, `model`, `firmware_revision`/`software_revision` and
    /// `hardware_revision` text readings into the device's Home Assistant description.
    ///
    /// Event readings (a `button`'s `press`, a `dimmer`'s `rotate_left`: ``SensorClassTable/eventTypes(name:)``)
    /// are also published on the device's event topic, `{"event_type":"press"}`, for Home Assistant's `event`
    /// entities: once per packet (not for a record of an advertisement that repeats the previous one, by
    /// `advertisement`'s packet id), never for `none`, never retained and never from the spool (an event is news
    /// now; one that happened while the broker was away is not fired later, and a record sent again is not an
    /// event again).
    ///
    /// - Parameters:
    ///   - sequence: the record's `seq`, as in its JSON (spool order is submit order; call in `seq` order).
    ///   - advertisement: for a record made from an advertisement (the device is then announced as passive), its
    ///     packet id; nil for a poll's record.
    ///   - history: a record of the device's own history (a deferred download): published on the device's
    ///     `history` topic, not `state` (Home Assistant's MQTT sensors take a state's time from its arrival, so an
    ///     hour of last week must not become the sensor's state now); it says nothing of the device's availability
    ///     and announces nothing.
    ///   - payload: the record's JSON object, UTF-8, without the newline.
    /// - Throws: `.unknownDevice`; `.spool` when the write or sync failed (the record is not spooled durably;
    ///   after a failed sync it may still be delivered);
    ///   `.invalidConfiguration` for a record larger than an eighth of the spool's limit. A record that was not
    ///   written is lost (``BridgeError/recordLost``), counted on ``BridgeStatistics/dropped`` and the `dropped`
    ///   topic.
    public func submit(
        device: String, sequence: UInt64, succeeded: Bool?, readings: [Reading] = [],
        advertisement: BridgeAdvertisement? = nil, history: Bool = false, payload: [UInt8]
    ) throws(BridgeError) {
        guard state.withLock({ $0.devices[device] != nil }) else {
            throw BridgeError(code: .unknownDevice, message: "no device \"\(device)\" is configured for MQTT")
        }
        let record = SpoolRecord(
            sequence: sequence, succeeded: succeeded == true, device: device, payload: payload, history: history)
        // The sync is made outside the spool's lock, after the record was handed over or the delivery woken: the
        // record is published while the disk flushes (1–3 ms here), and `submit` still returns only once it is
        // durable.
        let appended = spool.withLock { spool in
            Result { () throws(BridgeError) in
                (try spool.appendDeferringSync(record), spool.dropped, spool.pending.last?.id)
            }
        }
        let ((dropped, pendingSync), total, entryID): ((UInt64, Spool.PendingSync?), UInt64, UInt64?)
        do {
            ((dropped, pendingSync), total, entryID) = try appended.get()
        } catch {
            // Lost, not merely late: said on `dropped` at once (the count reaches the disk with the next mark).
            if error.recordLost {
                let total = spool.withLock { $0.dropped }
                state.withLock { $0.enqueue(.message(retained(topics.dropped, "\(total)"))) }
                wakeupContinuation.yield()
            }
            throw error
        }
        // Before the record can be handed over: its PUBACK may come before `submit` returns.
        if let entryID { noteSpooled(entryID) }
        if dropped > 0 {
            logger.warning(
                "spool full: dropped the oldest records", metadata: ["dropped": "\(dropped)", "total": "\(total)"])
        }
        // The record goes to the broker by one of two routes. When nothing is queued before it (this record's own
        // availability, failures or discovery messages included: Home Assistant must have a sensor's config before
        // its first value), no control message is being sent, the client is connected and the record is the only
        // pending one, it is handed straight to the client, whose thread moves the acknowledged mark after the
        // PUBACK: one hand-off per record, as records spread over a tick travel. Otherwise the delivery task is
        // woken, sends what is queued, then the spool in order, in batches.
        let client = state.withLock { state -> MQTTClient? in
            if !history, var entry = state.devices[device] {
                if let succeeded, let change = entry.availability.record(succeeded: succeeded) {
                    state.enqueue(.message(retained(topics.availability(device), change.rawValue)))
                }
                if entry.publishedFailures != entry.availability.consecutiveFailures {
                    entry.publishedFailures = entry.availability.consecutiveFailures
                    state.enqueue(
                        .message(retained(topics.failures(device), "\(entry.availability.consecutiveFailures)")))
                }
                var announce = learn(readings, into: &entry)
                var fresh = true
                if let advertisement {
                    if !entry.passive {
                        entry.passive = true
                        announce = true
                    }
                    if advertisement.isRepeat
                        || (advertisement.packetID != nil && advertisement.packetID == entry.lastPacketID)
                    {
                        fresh = false
                    }
                    if let packetID = advertisement.packetID { entry.lastPacketID = packetID }
                }
                // The announcement first: HA must have the event entity before its first event.
                if announce { state.enqueue(.announce(device: device)) }
                if fresh {
                    for message in eventMessages(readings, device: device, packetID: advertisement?.packetID) {
                        state.enqueue(.message(message))
                    }
                }
                state.devices[device] = entry
            }
            if dropped > 0 { state.enqueue(.message(retained(topics.dropped, "\(total)"))) }
            return state.connected && state.outgoing.isEmpty && !state.flushing ? state.client : nil
        }
        var direct: Spool.Entry?
        if let client, let entryID {
            direct = spool.withLock { spool -> Spool.Entry? in
                guard spool.outForDelivery == .none, spool.pendingCount == 1, let first = spool.first,
                    first.id == entryID
                else { return nil }
                spool.outForDelivery = .direct(first.id)
                return first
            }
            if let direct {
                hand(record, entry: direct, to: client)
                state.withLock { $0.handedDirectly += 1 }
            }
        }
        if direct == nil { wakeupContinuation.yield() }
        try pendingSync?.perform()
    }

    /// The direct route: publishes `record` (the only pending entry) on the client's thread, and there, after
    /// its PUBACK, moves the spool's acknowledged mark past it. A lost connection leaves it pending for the
    /// delivery task to send again after the next CONNACK; a record the broker refuses for good is skipped and
    /// logged, as the delivery task does.
    private func hand(_ record: SpoolRecord, entry: Spool.Entry, to client: MQTTClient) {
        let message = MQTTOutgoingMessage(
            topic: topics.record(record), payload: record.payload, qos: configuration.qos, retain: false,
            properties: MQTTProperties(contentType: "application/json"))
        client.publish(message) { [self] outcome in
            var refused: MQTTError?
            if case .failure(let error) = outcome, error.code != .disconnected, error.code != .cancelled,
                error.code != .closed
            {
                refused = error
            }
            // Done with it when acknowledged or refused for good; kept pending after a lost connection.
            let done = refused != nil || (try? outcome.get()) != nil
            let (more, acknowledged) = spool.withLock { spool in
                spool.outForDelivery = .none
                let acknowledged = Result { () throws(BridgeError) in
                    if done { try spool.acknowledge(through: entry.id) }
                }
                return (spool.pendingCount > 0, acknowledged)
            }
            if done { noteAcknowledged(through: entry.id) }
            if let refused {
                logger.error(
                    "the broker refused a record; skipping it",
                    metadata: ["device": "\(record.device)", "seq": "\(record.sequence)", "error": "\(refused)"])
            }
            if case .failure(let error) = acknowledged {
                logger.error("cannot record an acknowledgement in the spool", metadata: ["error": "\(error)"])
            }
            // Records submitted meanwhile, or this one after a lost connection: the delivery task's.
            if more { wakeupContinuation.yield() }
        }
    }

    /// The daemon's health changed (a stalled scheduler, an adapter the healing ladder gave up on, or all well
    /// again): `text` is published retained on `<prefix>/<gateway>/health`, and again after each connection.
    public func healthChanged(_ text: String) {
        let changed = state.withLock { state -> Bool in
            guard state.health != text else { return false }
            state.health = text
            state.enqueue(.message(retained(topics.health, text)))
            return true
        }
        if changed { wakeupContinuation.yield() }
    }

    /// This gateway started or stopped holding a shared device (``BridgeDevice/shared``): the holder announces it
    /// to Home Assistant with its own topics (the entities follow the device from gateway to gateway).
    public func holdChanged(device: String, holding: Bool) {
        let changed = state.withLock { state -> Bool in
            guard var entry = state.devices[device], entry.device.shared, entry.holding != holding else { return false }
            entry.holding = holding
            state.devices[device] = entry
            if holding { state.enqueue(.announce(device: device)) }
            return true
        }
        if changed { wakeupContinuation.yield() }
    }

    /// The device's effective interval changed (low power stretched it, or an `interval/set` command was
    /// applied): echoes it retained on `<device>/interval` and re-announces the device with the new
    /// `expire_after`.
    public func intervalChanged(device: String, to interval: Duration) {
        let known = state.withLock { state -> Bool in
            guard var entry = state.devices[device] else { return false }
            let before = expireAfter(entry.interval)
            entry.interval = interval
            state.devices[device] = entry
            state.enqueue(.message(retained(topics.interval(device), interval.compact)))
            if expireAfter(interval) != before { state.enqueue(.announce(device: device)) }
            return true
        }
        if known {
            wakeupContinuation.yield()
        } else {
            logger.warning("interval of an unknown device", metadata: ["device": "\(device)"])
        }
    }

    public var statistics: BridgeStatistics {
        let connected = state.withLock { $0.connected }
        return spool.withLock { spool in
            BridgeStatistics(
                spooled: spool.appended, delivered: spool.delivered, dropped: spool.dropped,
                pending: spool.pendingCount,
                spoolBytes: spool.bytes, corrupt: spool.corrupt, unwritten: spool.unwritten, connected: connected)
        }
    }

    // MARK: Helpers shared by the extensions

    func retained(_ topic: String, _ text: String) -> MQTTOutgoingMessage {
        MQTTOutgoingMessage(topic: topic, payload: Array(text.utf8), qos: configuration.qos, retain: true)
    }

    /// `expire_after` in whole seconds: the multiplier × the interval, rounded up, at least 1.
    func expireAfter(_ interval: Duration) -> Int {
        let milliseconds = interval.milliseconds * Int64(max(configuration.expireAfterMultiplier, 1))
        return Int(max((milliseconds + 999) / 1_000, 1))
    }

    /// The event messages of a record's readings: one per event reading whose value is one of its event types
    /// (`none`, and a value HA would refuse, are not events), with the dimmer's steps and the packet id as the
    /// event's attributes.
    private func eventMessages(_ readings: [Reading], device: String, packetID: UInt32?) -> [MQTTOutgoingMessage] {
        var messages: [MQTTOutgoingMessage] = []
        for reading in readings {
            guard case .text(let type) = reading.value, let types = SensorClassTable.eventTypes(name: reading.name),
                types.contains(type)
            else { continue }
            var json = JSONObject()
            json.string("event_type", type)
            if let detail = SensorClassTable.eventDetail(of: reading.name),
                let value = readings.first(where: { $0.name == detail.reading })?.value?.doubleValue,
                let steps = Int64(exactly: value)
            {
                json.integer(detail.attribute, steps)
            }
            if let packetID { json.integer("packet_id", Int64(packetID)) }
            messages.append(
                MQTTOutgoingMessage(
                    topic: topics.event(device, reading: reading.name), payload: json.bytes, qos: configuration.qos,
                    retain: false))
        }
        return messages
    }

    /// Adds unseen reading names to the device and Device Information texts to its description; whether
    /// anything changed that HA must be told.
    private func learn(_ readings: [Reading], into entry: inout BridgeState.DeviceState) -> Bool {
        var changed = false
        for reading in readings {
            if case .text(let text) = reading.value {
                switch reading.name {
                case "manufacturer" where entry.device.manufacturer != text:
                    entry.device.manufacturer = text
                    changed = true
                case "model" where entry.device.model != text:
                    entry.device.model = text
                    changed = true
                case "firmware_revision", "software_revision":
                    if entry.softwareVersion != text {
                        entry.softwareVersion = text
                        changed = true
                    }
                case "hardware_revision" where entry.hardwareVersion != text:
                    entry.hardwareVersion = text
                    changed = true
                default:
                    break
                }
            }
            // Arrays (RR intervals) have no single state for a sensor; they stay in the state record only.
            if case .numbers = reading.value { continue }
            var isText = false
            var isBoolean = false
            switch reading.value {
            case .text: isText = true
            case .boolean: isBoolean = true
            default: break
            }
            if let index = entry.readings.firstIndex(where: { $0.name == reading.name }) {
                // An expected reading first known as a number that turns out a boolean becomes a binary sensor.
                guard isBoolean, !entry.readings[index].isBoolean else { continue }
                entry.readings[index].isBoolean = true
                entry.readings[index].isText = false
                changed = true
                continue
            }
            entry.readings.append(
                BridgeDevice.ExpectedReading(
                    name: reading.name, unit: reading.unit, isText: isText, isBoolean: isBoolean))
            changed = true
        }
        return changed
    }
}

extension MQTTBridge {
    /// Calls `observer` with `true` at each CONNACK and `false` each time the connection is lost (and when
    /// ``run()`` ends), on the client's thread: it must be quick. The daemon's deferred tasks that require the
    /// network wait on it.
    public func onConnectionChange(_ observer: @escaping @Sendable (Bool) -> Void) {
        connectionObservers.withLock { $0.append(observer) }
    }

    /// Whether the bridge is connected to its broker now.
    public var isConnected: Bool {
        state.withLock { $0.connected }
    }

    func connectionChanged(_ connected: Bool) {
        for observer in connectionObservers.withLock({ $0 }) { observer(connected) }
    }
}
