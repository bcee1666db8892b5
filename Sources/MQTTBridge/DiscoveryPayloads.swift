import Basics
/// Home Assistant MQTT discovery configs for the gateway and each device: pure, from plain values.
///
/// Topics are `<discovery prefix>/<component>/<node id>/<object id>/config` with the gateway as node id and
/// `<address>_<reading>` as object id (HA allows `[a-zA-Z0-9_-]` there; see ``BridgeTopics/identifier(_:)``).
/// Payloads use the full key names (HA accepts them beside the abbreviations of `abbreviations.py`) so a person
/// reading them with mosquitto_sub understands them. Every entity carries `unique_id`, the `device` it belongs
/// to and `origin`; the readings' sensors take device class, unit and state class from ``SensorClassTable``.
///
/// Entities per BLE device:
/// - one `sensor` per reading, value from the state record (`value_json.readings['<name>'].value`); when a
///   record lacks the reading (a failed poll) the template renders nothing, which HA's MQTT entities ignore
///   (the previous state stays) rather than blanking it; staleness is `availability`'s and `expire_after`'s job;
/// - one `binary_sensor` per boolean reading (an advertisement's door, motion, leak), with the device class of
///   ``SensorClassTable/binaryDeviceClass(name:)``; the template renders the JSON's own `true` / `false`, which are
///   the payloads on and off;
/// - one `event` per event reading (a button, a dimmer: ``SensorClassTable/eventTypes(name:)``), on the device's
///   event topic, where the bridge publishes each new event once (never retained, never from a repeated packet,
///   never `none`); a dimmer's steps are the event's `steps` attribute, not an entity;
/// - diagnostic sensors: last result, consecutive failures (from `<device>/failures`), window used (ms), link time,
///   last error; a passive device (heard, not polled) has no window and no link, and has the records' `rssi`;
/// - a `button` "Poll now" on the poll command topic (available while the gateway is: a device that is offline is
///   exactly the one worth polling now), for devices the daemon connects to.
/// The gateway itself is a device too, with a connectivity `binary_sensor` on its status topic and a sensor of
/// the records the spool dropped; every BLE device names it in `via_device`.
struct DiscoveryPayloads: Sendable {
    /// A device as announced: the configured values, completed by Device Information readings.
    struct Device: Sendable, Hashable {
        var name: String
        var address: String
        var manufacturer: String?
        var model: String?
        var softwareVersion: String?
        var hardwareVersion: String?
        var readings: [BridgeDevice.ExpectedReading]
        /// `expire_after`, whole seconds.
        var expireAfter: Int
        /// Shared by a fleet: announced by its holder under the node id ``sharedNodeID``, with a "Holder" sensor.
        var shared = false
        /// Heard through its advertisements, never connected to (``BridgeDevice/passive``).
        var passive = false
    }

    /// One retained config message; `key` is the device address or `gateway`.
    struct Config: Sendable, Hashable {
        var key: String
        var topic: String
        var payload: [UInt8]
    }

    static let gatewayKey = "gateway"

    let discoveryPrefix: String
    let topics: BridgeTopics
    let gateway: String

    var nodeID: String { BridgeTopics.identifier(gateway) }
    var gatewayIdentifier: String { "keepalive_gateway_" + BridgeTopics.identifier(gateway) }
    /// HA publishes `online` here when it starts (its birth message).
    var homeAssistantStatus: String { discoveryPrefix + "/status" }

    static func addressIdentifier(_ address: String) -> String {
        BridgeTopics.identifier(String(address.unicodeScalars.filter { $0 != ":" }.map(Character.init)))
    }

    /// The node id of shared devices' configs: the same on every gateway of a fleet, so the holder of the moment
    /// overwrites the retained config (same unique ids, its own topics) instead of adding a second device.
    static let sharedNodeID = "keepalive_shared"

    func topic(component: String, objectID: String, shared: Bool = false) -> String {
        "\(discoveryPrefix)/\(component)/\(shared ? Self.sharedNodeID : nodeID)/\(objectID)/config"
    }

    // MARK: The gateway

    func gatewayConfigs() -> [Config] {
        var status = entity(name: "Status", uniqueID: gatewayIdentifier + "_status", availability: false)
        status.string("state_topic", topics.status)
        status.string("payload_on", "online")
        status.string("payload_off", "offline")
        status.string("device_class", "connectivity")
        status.string("entity_category", "diagnostic")
        gatewayDevice(&status)
        var dropped = entity(name: "Records dropped", uniqueID: gatewayIdentifier + "_dropped", availability: false)
        dropped.string("state_topic", topics.dropped)
        dropped.string("state_class", "total_increasing")
        dropped.string("entity_category", "diagnostic")
        gatewayDevice(&dropped)
        var health = entity(name: "Health", uniqueID: gatewayIdentifier + "_health", availability: false)
        health.string("state_topic", topics.health)
        // HA keeps at most 255 characters of a state.
        health.string("value_template", "{{ value[:250] }}")
        health.string("icon", "mdi:heart-pulse")
        health.string("entity_category", "diagnostic")
        gatewayDevice(&health)
        return [
            Config(
                key: Self.gatewayKey, topic: topic(component: "binary_sensor", objectID: "gateway_status"),
                payload: status.bytes),
            Config(
                key: Self.gatewayKey, topic: topic(component: "sensor", objectID: "gateway_dropped"),
                payload: dropped.bytes),
            Config(
                key: Self.gatewayKey, topic: topic(component: "sensor", objectID: "gateway_health"),
                payload: health.bytes),
        ]
    }

    private func gatewayDevice(_ json: inout JSONObject) {
        json.object("device") { device in
            device.array("identifiers") { $0.string(gatewayIdentifier) }
            device.string("name", "keepalive \(gateway)")
            device.string("manufacturer", "keepalive")
            device.string("model", "BLE gateway")
        }
    }

    // MARK: A BLE device

    func configs(for device: Device) -> [Config] {
        let id = Self.addressIdentifier(device.address)
        var configs: [Config] = []
        for reading in device.readings {
            if reading.isBoolean {
                configs.append(binarySensorConfig(device, reading, id: id))
            } else if reading.isText, let types = SensorClassTable.eventTypes(name: reading.name) {
                configs.append(eventConfig(device, reading, types: types, id: id))
            } else if !reading.isText && SensorClassTable.isEventDetail(reading.name) {
                continue
            } else {
                configs.append(sensorConfig(device, reading, id: id))
            }
        }
        typealias Diagnostic = (object: String, name: String, template: String?, unit: String?, deviceClass: String?)
        var diagnostics: [Diagnostic] = [("last_result", "Last result", "{{ value_json.result }}", nil, nil)]
        if device.passive {
            // The object id is not `rssi`: a reading of that name would have the same unique id.
            diagnostics.append(
                (
                    "advertisement_rssi", "Signal strength",
                    "{{ value_json.rssi if value_json.rssi is defined and value_json.rssi is not none else '' }}",
                    "dBm", "signal_strength"
                ))
        } else {
            diagnostics += [
                (
                    "window_used", "Window used", "{{ value_json.window.used_ms if value_json.window else '' }}", "ms",
                    "duration"
                ),
                // The airtime the sensor's battery pays for per poll (BlueZ's Connected true → false).
                (
                    "link_time", "Link time", "{{ value_json.link_ms if value_json.link_ms is not none else '' }}",
                    "ms", "duration"
                ),
            ]
        }
        diagnostics += [
            (
                "last_error", "Last error",
                """
                {{ ((value_json.error.code ~ ': ' ~ value_json.error.message) if value_json.error else \
                'none')[:250] }}
                """,
                nil, nil
            ),
            ("consecutive_failures", "Consecutive failures", nil, nil, nil),
        ]
        for diagnostic in diagnostics {
            let uniqueID = "keepalive_\(id)_\(diagnostic.object)"
            var json = entity(name: diagnostic.name, uniqueID: uniqueID, availability: true, device: device)
            if let template = diagnostic.template {
                json.string("state_topic", topics.state(device.name))
                json.string("value_template", template)
                json.integer("expire_after", device.expireAfter)
            } else {
                json.string("state_topic", topics.failures(device.name))
                json.string("state_class", "measurement")
            }
            if let deviceClass = diagnostic.deviceClass { json.string("device_class", deviceClass) }
            if let unit = diagnostic.unit {
                json.string("unit_of_measurement", unit)
                json.string("state_class", "measurement")
            }
            json.string("entity_category", "diagnostic")
            deviceObject(&json, device, id: id)
            configs.append(
                Config(
                    key: device.address,
                    topic: topic(component: "sensor", objectID: "\(id)_\(diagnostic.object)", shared: device.shared),
                    payload: json.bytes))
        }
        if !device.passive {
            var button = entity(name: "Poll now", uniqueID: "keepalive_\(id)_poll", availability: false)
            button.array("availability") { $0.object { $0.string("topic", topics.status) } }
            button.string("command_topic", topics.poll(device.name))
            button.string("payload_press", "PRESS")
            deviceObject(&button, device, id: id)
            configs.append(
                Config(
                    key: device.address,
                    topic: topic(component: "button", objectID: "\(id)_poll", shared: device.shared),
                    payload: button.bytes))
        }
        if device.shared {
            // Which gateway holds it: from each record's `holder`.
            var holder = entity(name: "Holder", uniqueID: "keepalive_\(id)_holder", availability: true, device: device)
            holder.string("state_topic", topics.state(device.name))
            holder.string("value_template", "{{ value_json.holder if value_json.holder is defined else '' }}")
            holder.string("icon", "mdi:router-wireless")
            holder.string("entity_category", "diagnostic")
            deviceObject(&holder, device, id: id)
            configs.append(
                Config(
                    key: device.address, topic: topic(component: "sensor", objectID: "\(id)_holder", shared: true),
                    payload: holder.bytes))
        }
        return configs
    }

    private func sensorConfig(_ device: Device, _ reading: BridgeDevice.ExpectedReading, id: String) -> Config {
        let readingID = BridgeTopics.identifier(reading.name)
        let classification = SensorClassTable.classify(name: reading.name, unit: reading.unit, isText: reading.isText)
        var json = entity(
            name: Self.displayName(reading.name), uniqueID: "keepalive_\(id)_\(readingID)", availability: true,
            device: device)
        json.string("state_topic", topics.state(device.name))
        let key = Self.jinjaString(reading.name)
        json.string(
            "value_template",
            "{% if \(key) in value_json.get('readings', {}) %}{{ value_json.readings[\(key)].value }}{% endif %}")
        if let deviceClass = classification.deviceClass { json.string("device_class", deviceClass) }
        if let unit = classification.unit { json.string("unit_of_measurement", unit) }
        if let stateClass = classification.stateClass { json.string("state_class", stateClass) }
        if reading.isText { json.string("entity_category", "diagnostic") }
        json.integer("expire_after", device.expireAfter)
        deviceObject(&json, device, id: id)
        return Config(
            key: device.address,
            topic: topic(component: "sensor", objectID: "\(id)_\(readingID)", shared: device.shared),
            payload: json.bytes)
    }

    /// A boolean reading as a `binary_sensor`: the template renders the JSON's `true` / `false` (nothing when the
    /// record lacks the reading or its value is null), and those are `payload_on` / `payload_off`.
    private func binarySensorConfig(_ device: Device, _ reading: BridgeDevice.ExpectedReading, id: String) -> Config {
        let readingID = BridgeTopics.identifier(reading.name)
        var json = entity(
            name: Self.displayName(reading.name), uniqueID: "keepalive_\(id)_\(readingID)", availability: true,
            device: device)
        json.string("state_topic", topics.state(device.name))
        let key = Self.jinjaString(reading.name)
        json.string(
            "value_template",
            """
            {% if \(key) in value_json.get('readings', {}) and value_json.readings[\(key)].value is not none %}\
            {{ 'true' if value_json.readings[\(key)].value else 'false' }}{% endif %}
            """)
        json.string("payload_on", "true")
        json.string("payload_off", "false")
        if let deviceClass = SensorClassTable.binaryDeviceClass(name: reading.name) {
            json.string("device_class", deviceClass)
        }
        json.integer("expire_after", device.expireAfter)
        deviceObject(&json, device, id: id)
        return Config(
            key: device.address,
            topic: topic(component: "binary_sensor", objectID: "\(id)_\(readingID)", shared: device.shared),
            payload: json.bytes)
    }

    /// An event reading as an `event` entity on the device's event topic for it, whose messages are HA's own
    /// event payload (`{"event_type":"press"}`, extra keys become the event's attributes): no template.
    private func eventConfig(
        _ device: Device, _ reading: BridgeDevice.ExpectedReading, types: [String], id: String
    ) -> Config {
        let readingID = BridgeTopics.identifier(reading.name)
        var json = entity(
            name: Self.displayName(reading.name), uniqueID: "keepalive_\(id)_\(readingID)", availability: true,
            device: device)
        json.string("state_topic", topics.event(device.name, reading: reading.name))
        json.array("event_types") { list in
            for type in types { list.string(type) }
        }
        if SensorClassTable.baseName(reading.name) == "button" { json.string("device_class", "button") }
        deviceObject(&json, device, id: id)
        return Config(
            key: device.address,
            topic: topic(component: "event", objectID: "\(id)_\(readingID)", shared: device.shared),
            payload: json.bytes)
    }

    /// The keys every entity starts with; `availability` = [gateway status, device availability], mode all.
    private func entity(name: String, uniqueID: String, availability: Bool, device: Device? = nil) -> JSONObject {
        var json = JSONObject()
        json.string("name", name)
        json.string("unique_id", uniqueID)
        if availability, let device {
            json.array("availability") { list in
                list.object { $0.string("topic", topics.status) }
                list.object { $0.string("topic", topics.availability(device.name)) }
            }
            json.string("availability_mode", "all")
        }
        json.object("origin") { $0.string("name", "keepalive") }
        return json
    }

    private func deviceObject(_ json: inout JSONObject, _ device: Device, id: String) {
        json.object("device") { object in
            object.array("identifiers") { $0.string("keepalive_\(id)") }
            object.array("connections") { list in
                list.array { pair in
                    pair.string("mac")
                    pair.string(device.address)
                }
            }
            object.string("name", device.name)
            if let manufacturer = device.manufacturer { object.string("manufacturer", manufacturer) }
            if let model = device.model { object.string("model", model) }
            if let version = device.softwareVersion { object.string("sw_version", version) }
            if let version = device.hardwareVersion { object.string("hw_version", version) }
            object.string("via_device", gatewayIdentifier)
        }
    }

    /// `heart_rate` → `Heart rate`.
    static func displayName(_ name: String) -> String {
        let spaced = name.replacingUnderscores()
        guard let first = spaced.first else { return name }
        return first.uppercased() + spaced.dropFirst()
    }

    /// A reading name as a single-quoted Jinja string literal.
    static func jinjaString(_ name: String) -> String {
        var text = "'"
        for character in name {
            switch character {
            case "'": text += "\\'"
            case "\\": text += "\\\\"
            default: text.append(character)
            }
        }
        return text + "'"
    }
}

extension String {
    fileprivate func replacingUnderscores() -> String {
        String(map { $0 == "_" ? " " : $0 })
    }
}
