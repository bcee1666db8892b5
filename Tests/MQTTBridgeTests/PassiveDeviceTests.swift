import LocalServices
import TestHarness
import Foundation
import MQTT
@testable import MQTTBridge
@testable import Readings
import Testing

/// Devices heard through their advertisements: binary sensors, events, the classes and units of their readings.
@Suite struct PassiveDeviceTests {
    let payloads = DiscoveryPayloads(
        discoveryPrefix: "homeassistant", topics: BridgeTopics(prefix: "keepalive", gateway: "gw"), gateway: "gw")

    var tag: DiscoveryPayloads.Device {
        DiscoveryPayloads.Device(
            name: "tag", address: "AA:BB:CC:DD:EE:09",
            readings: [
                .init(name: "temperature", unit: "°C"), .init(name: "pressure", unit: "hPa"),
                .init(name: "door", isBoolean: true), .init(name: "battery_low", isBoolean: true),
                .init(name: "moisture_detected", isBoolean: true), .init(name: "generic_boolean", isBoolean: true),
                .init(name: "button", isText: true), .init(name: "dimmer", isText: true),
                .init(name: "dimmer_steps"), .init(name: "energy", unit: "kWh"),
            ],
            expireAfter: 90, passive: true)
    }

    func config(_ suffix: String) throws -> [String: Any] {
        let config = try #require(payloads.configs(for: tag).first { $0.topic.hasSuffix(suffix) }, "no \(suffix)")
        return try #require(jsonObject(config.payload))
    }

    @Test func booleansAreBinarySensorsWithHomeAssistantsClassAndTheJSONsTrueAndFalse() throws {
        let door = try config("binary_sensor/gw/aabbccddee09_door/config")
        #expect(door["device_class"] as? String == "door")
        #expect(door["payload_on"] as? String == "true")
        #expect(door["payload_off"] as? String == "false")
        #expect(door["state_topic"] as? String == "keepalive/gw/tag/state")
        #expect(door["expire_after"] as? Int == 90)
        #expect(door["unit_of_measurement"] == nil && door["state_class"] == nil)
        #expect(
            door["value_template"] as? String
                == "{% if 'door' in value_json.get('readings', {}) and value_json.readings['door'].value is not none %}"
                + "{{ 'true' if value_json.readings['door'].value else 'false' }}{% endif %}")
        #expect(try config("binary_sensor/gw/aabbccddee09_battery_low/config")["device_class"] as? String == "battery")
        #expect(
            try config("binary_sensor/gw/aabbccddee09_moisture_detected/config")["device_class"] as? String
                == "moisture")
        #expect(try config("binary_sensor/gw/aabbccddee09_generic_boolean/config")["device_class"] == nil)
    }

    @Test func buttonsAndDimmersAreEventsOnTheirEventTopicAndTheStepsAreNoEntity() throws {
        let button = try config("event/gw/aabbccddee09_button/config")
        #expect(button["device_class"] as? String == "button")
        #expect(button["state_topic"] as? String == "keepalive/gw/tag/event/button")
        #expect(button["value_template"] == nil)
        #expect(
            button["event_types"] as? [String] == [
                "press", "double_press", "triple_press", "long_press", "long_double_press", "long_triple_press",
                "hold_press", "hold_release",
            ])
        #expect(button["expire_after"] == nil)
        let dimmer = try config("event/gw/aabbccddee09_dimmer/config")
        #expect(dimmer["device_class"] == nil)
        #expect(dimmer["event_types"] as? [String] == ["rotate_left", "rotate_right"])
        let configs = payloads.configs(for: tag)
        #expect(!configs.contains { $0.topic.contains("dimmer_steps") })
        #expect(!configs.contains { $0.topic.contains("/sensor/gw/aabbccddee09_button") })
    }

    @Test func aPassiveDeviceHasItsSignalStrengthAndNoPollButtonWindowOrLink() throws {
        let configs = payloads.configs(for: tag)
        let rssi = try config("sensor/gw/aabbccddee09_advertisement_rssi/config")
        #expect(rssi["device_class"] as? String == "signal_strength")
        #expect(rssi["unit_of_measurement"] as? String == "dBm")
        #expect(rssi["state_class"] as? String == "measurement")
        #expect(rssi["entity_category"] as? String == "diagnostic")
        #expect((rssi["value_template"] as? String)?.contains("value_json.rssi") == true)
        for gone in ["button/gw/aabbccddee09_poll", "aabbccddee09_window_used", "aabbccddee09_link_time"] {
            #expect(!configs.contains { $0.topic.contains(gone) }, "\(gone)")
        }
        // Readings keep their sensors, with HA's classes: a meter's energy is a total.
        let energy = try config("sensor/gw/aabbccddee09_energy/config")
        #expect(energy["device_class"] as? String == "energy" && energy["state_class"] as? String == "total")
        #expect(try config("sensor/gw/aabbccddee09_pressure/config")["device_class"] as? String == "pressure")
        var uniqueIDs = Set<String>()
        for config in configs {
            let json = try #require(jsonObject(config.payload))
            #expect(uniqueIDs.insert(json["unique_id"] as? String ?? "").inserted)
            if config.topic.contains("/sensor/") {
                #expect(
                    HomeAssistantAcceptedPairs.accepts(
                        deviceClass: json["device_class"] as? String, unit: json["unit_of_measurement"] as? String,
                        stateClass: json["state_class"] as? String), "\(config.topic)")
            }
        }
    }

    @Test func everyBTHomeBinarySensorHasAHomeAssistantClassAndEveryEventItsTypes() {
        var booleans: [String] = []
        for object in BTHome.objects {
            guard case .fields(let fields, _) = object.layout else { continue }
            for field in fields {
                if case .boolean = field.kind { booleans.append(field.name) }
            }
        }
        #expect(booleans.count == 28)
        for name in booleans where name != "generic_boolean" {
            let deviceClass = SensorClassTable.binaryDeviceClass(name: name)
            #expect(deviceClass.map(HomeAssistantAcceptedPairs.binarySensorClasses.contains) == true, "\(name)")
            #expect(SensorClassTable.binaryDeviceClass(name: name + "_2") == deviceClass)
        }
        #expect(
            Set(SensorClassTable.eventTypes(name: "button") ?? [])
                == Set(BTHome.buttonEvents.values).subtracting(["none"]))
        #expect(
            Set(SensorClassTable.eventTypes(name: "dimmer_2") ?? [])
                == Set(BTHome.dimmerEvents.values).subtracting(["none"]))
        #expect(SensorClassTable.eventTypes(name: "buttons") == nil)
        #expect(SensorClassTable.eventDetail(of: "dimmer_2")?.reading == "dimmer_steps_2")
    }

    @Test func announcedStateKeepsBooleansAndLearnedPassiveDevices() {
        var state = AnnouncedState()
        state.readings["AA:BB:CC:DD:EE:09"] = [
            .init(name: "door", isBoolean: true), .init(name: "button", isText: true), .init(name: "co2", unit: "ppm"),
        ]
        state.passive = ["AA:BB:CC:DD:EE:09"]
        #expect(AnnouncedState(parsing: state.encoded) == state)
    }

    @Test func anEventIsPublishedOncePerNewPacketNeverForNoneAndThePassiveDeviceLosesItsPollButton()
        async throws
    {
        let broker = try await MosquittoBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer {
            broker.remove()
            removeDirectory(directory)
        }
        let subscriber = try await Collector(port: broker.port, filters: ["homeassistant/#", "keepalive/gw/#"])
        let device = BridgeDevice(name: "tag", address: "AA:BB:CC:DD:EE:09", interval: .seconds(30))
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(port: broker.port, directory: directory), devices: [device],
            logger: testLogger())
        let running = RunningBridge(bridge)
        let pollButton = "homeassistant/button/gw/aabbccddee09_poll/config"
        try await subscriber.wait(for: pollButton) { !$0.payload.isEmpty }
        try await running.waitUntilConnected()
        func submit(_ sequence: UInt64, packet: UInt32?, button: String, door: Bool, steps: Int64? = nil) throws {
            var readings = [
                Reading(name: "door", value: .boolean(door)), Reading(name: "button", value: .text(button)),
            ]
            if let steps {
                readings += [
                    Reading(name: "dimmer", value: .text("rotate_right")),
                    Reading(name: "dimmer_steps", value: .unsigned(UInt64(steps))),
                ]
            }
            try bridge.submit(
                device: "tag", sequence: sequence, succeeded: true, readings: readings,
                advertisement: BridgeAdvertisement(packetID: packet), payload: recordPayload(sequence, device: "tag"))
        }
        try submit(0, packet: 1, button: "press", door: false)
        try submit(1, packet: 1, button: "press", door: false)  // the same packet again
        try submit(2, packet: 2, button: "none", door: true)
        try submit(3, packet: 3, button: "double_press", door: true, steps: 3)
        try await running.waitUntilDrained()
        let eventTopic = "keepalive/gw/tag/event/button"
        try await subscriber.wait(for: eventTopic) { String(decoding: $0.payload, as: UTF8.self).contains("double") }
        try await subscriber.wait(for: "keepalive/gw/tag/event/dimmer")
        let events = subscriber.messages(on: eventTopic).map { String(decoding: $0.payload, as: UTF8.self) }
        #expect(
            events == [
                #"{"event_type":"press","packet_id":1}"#, #"{"event_type":"double_press","packet_id":3}"#,
            ])
        #expect(subscriber.messages(on: eventTopic).allSatisfy { !$0.retain })
        #expect(
            subscriber.messages(on: "keepalive/gw/tag/event/dimmer").map { String(decoding: $0.payload, as: UTF8.self) }
                == [#"{"event_type":"rotate_right","steps":3,"packet_id":3}"#])
        // Announced before the first event, and the device is passive from its first advertisement on.
        let eventConfig = "homeassistant/event/gw/aabbccddee09_button/config"
        let configAt = try #require(subscriber.messages.firstIndex { $0.topic == eventConfig })
        let eventAt = try #require(subscriber.messages.firstIndex { $0.topic == eventTopic })
        #expect(configAt < eventAt)
        try await subscriber.wait(for: "homeassistant/binary_sensor/gw/aabbccddee09_door/config")
        try await subscriber.wait(for: "homeassistant/sensor/gw/aabbccddee09_advertisement_rssi/config")
        try await subscriber.wait(for: pollButton) { $0.payload.isEmpty }
        await subscriber.close()
        await running.stop()

        // The next start remembers the device is passive, and its binary sensor, before any record.
        let again = try await Collector(port: broker.port, filters: ["homeassistant/#"])
        let bridge2 = try MQTTBridge(
            configuration: bridgeConfiguration(port: broker.port, directory: directory), devices: [device],
            logger: testLogger())
        let running2 = RunningBridge(bridge2)
        try await running2.waitUntilConnected()
        try await again.wait(for: "homeassistant/binary_sensor/gw/aabbccddee09_door/config") { !$0.payload.isEmpty }
        try await again.wait(for: "homeassistant/sensor/gw/aabbccddee09_advertisement_rssi/config")
        #expect(again.messages(on: pollButton).allSatisfy { $0.payload.isEmpty })
        await again.close()
        await running2.stop()
    }
}
