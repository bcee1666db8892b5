import KeepAlive
import Logging
import MQTT

extension MQTTBridge {
    /// What a fresh connection needs, in this order: status `online`; the subscriptions (commands, HA's
    /// status); discovery (stale configs cleared first); every device's retained availability, failures and
    /// interval; the dropped count.
    func announceConnection(_ client: MQTTClient) async throws(MQTTError) {
        try await send(client, retained(topics.status, "online"))
        try await listen(client, topics.pollFilter)
        try await listen(client, topics.intervalSetFilter)
        if configuration.discovery { try await listen(client, discovery.homeAssistantStatus) }
        try await announceDiscovery(client, devices: nil)
        let (retainedState, dropped) = state.withLock { state -> ([MQTTOutgoingMessage], UInt64?) in
            var messages: [MQTTOutgoingMessage] = []
            for name in state.devices.keys.sorted() {
                guard let entry = state.devices[name] else { continue }
                if let availability = entry.availability.availability {
                    messages.append(retained(topics.availability(name), availability.rawValue))
                }
                if let failures = entry.publishedFailures {
                    messages.append(retained(topics.failures(name), "\(failures)"))
                }
                messages.append(retained(topics.interval(name), entry.interval.compact))
            }
            if let health = state.health { messages.append(retained(topics.health, health)) }
            return (messages, state.publishedDropped)
        }
        for message in retainedState { try await send(client, message) }
        let total = spool.withLock { $0.dropped }
        if total > 0 || dropped == nil, try await send(client, retained(topics.dropped, "\(total)")) {
            state.withLock { $0.publishedDropped = total }
        }
    }

    /// Publishes; a refusal for good (an ACL, a payload too large) is logged and the announcement goes on with
    /// the next message, so one forbidden topic does not hide the rest. Throws only when the connection went.
    @discardableResult
    func send(_ client: MQTTClient, _ message: MQTTOutgoingMessage) async throws(MQTTError) -> Bool {
        do {
            try await client.publish(message)
            return true
        } catch  where error.code == .disconnected || error.code == .cancelled || error.code == .closed {
            throw error
        } catch {
            logger.error("the broker refused a publish", metadata: ["topic": "\(message.topic)", "error": "\(error)"])
            return false
        }
    }

    /// Subscribes; a refusal is logged (those commands will not arrive) and the announcement goes on.
    private func listen(_ client: MQTTClient, _ filter: String) async throws(MQTTError) {
        do {
            try await client.subscribe(filter, qos: .atLeastOnce)
        } catch  where error.code == .disconnected || error.code == .cancelled || error.code == .closed {
            throw error
        } catch {
            logger.error("the broker refused a subscription", metadata: ["filter": "\(filter)", "error": "\(error)"])
        }
    }

    /// Publishes the discovery configs of `devices` (all and the gateway's when nil), first clearing configs
    /// announced before that are no longer wanted (a device removed from the configuration, discovery turned
    /// off). The discovery state file is saved *before* a config is published and after a stale one is
    /// cleared, so that a stop or crash in between errs towards clearing a config that was never published
    /// (harmless) rather than forgetting one that was.
    func announceDiscovery(_ client: MQTTClient, devices names: [String]?) async throws(MQTTError) {
        let (configs, stale, intent) = state.withLock {
            state -> ([DiscoveryPayloads.Config], [(String, String)], AnnouncedState?) in
            var configs: [DiscoveryPayloads.Config] = []
            if configuration.discovery {
                if names == nil { configs += discovery.gatewayConfigs() }
                for name in (names ?? state.devices.keys.sorted()) {
                    guard let entry = state.devices[name], entry.announced else { continue }
                    configs += discovery.configs(for: describe(entry))
                }
            }
            let keys = Set(configs.map(\.key))
            let wanted = Set(configs.map(\.topic))
            // A shared device's configs belong to whichever gateway holds it now: never cleared from here (the
            // holder of the moment has overwritten them), only forgotten when it leaves this configuration.
            let shared = Set(state.devices.values.filter { $0.device.shared }.map(\.device.address))
            // On a full announcement everything not wanted goes; for one device, only its own old topics.
            let stale = state.announced.topics.flatMap { key, topics in
                topics.filter { !wanted.contains($0) && (names == nil || keys.contains(key)) && !shared.contains(key) }
                    .map { (key, $0) }
            }.sorted { $0.1 < $1.1 }
            var next = state.announced
            for config in configs { next.topics[config.key, default: []].insert(config.topic) }
            for entry in state.devices.values {
                next.readings[entry.device.address] = entry.readings
                if entry.passive && !entry.device.passive {
                    next.passive.insert(entry.device.address)
                } else {
                    next.passive.remove(entry.device.address)
                }
            }
            guard next != state.announced else { return (configs, stale, nil) }
            state.announced = next
            return (configs, stale, next)
        }
        if let intent { saveAnnounced(intent) }
        if !stale.isEmpty {
            for (key, topic) in stale {
                // Refused: kept in the state file, to be tried again at the next connection.
                guard
                    try await send(
                        client, MQTTOutgoingMessage(topic: topic, payload: [], qos: configuration.qos, retain: true))
                else { continue }
                logger.info("cleared a stale Home Assistant config", metadata: ["topic": "\(topic)"])
                state.withLock { state in
                    state.announced.topics[key]?.remove(topic)
                    if state.announced.topics[key]?.isEmpty == true { state.announced.topics[key] = nil }
                }
            }
            saveAnnounced(state.withLock { $0.announced })
        }
        for config in configs {
            try await send(
                client,
                MQTTOutgoingMessage(topic: config.topic, payload: config.payload, qos: configuration.qos, retain: true))
        }
    }

    private func saveAnnounced(_ announced: AnnouncedState) {
        let directory = configuration.spoolDirectory
        do {
            try SpoolFiles.replace(
                directory + "/" + AnnouncedState.fileName, with: announced.encoded, directory: directory)
        } catch {
            // Not fatal: the next start may then leave a removed device's configs in place.
            logger.error("cannot save the discovery state", metadata: ["error": "\(error)"])
        }
    }

    func describe(_ entry: BridgeState.DeviceState) -> DiscoveryPayloads.Device {
        DiscoveryPayloads.Device(
            name: entry.device.name, address: entry.device.address, manufacturer: entry.device.manufacturer,
            model: entry.device.model, softwareVersion: entry.softwareVersion, hardwareVersion: entry.hardwareVersion,
            readings: entry.readings, expireAfter: expireAfter(entry.interval), shared: entry.device.shared,
            passive: entry.passive)
    }
}
