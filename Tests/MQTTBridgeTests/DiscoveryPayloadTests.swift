import Basics
import Testing
@testable import MQTTBridge

@Suite struct DiscoveryPayloadTests {
    let payloads = DiscoveryPayloads(
        discoveryPrefix: "homeassistant", topics: BridgeTopics(prefix: "keepalive", gateway: "gw"), gateway: "gw")

    var device: DiscoveryPayloads.Device {
        DiscoveryPayloads.Device(
            name: "kitchen", address: "AA:BB:CC:DD:EE:01", manufacturer: "Acme", model: "T1", softwareVersion: "1.2",
            readings: [
                .init(name: "temperature", unit: "°C"), .init(name: "humidity", unit: "%"),
                .init(name: "pm2_5", unit: "µg/m³"),
                .init(name: "heart_rate", unit: "bpm"), .init(name: "firmware_revision", isText: true),
            ],
            expireAfter: 90)
    }

    @Test func everyConfigHasIdentifiersUniqueIDOriginAndTheGatewayAsViaDevice() throws {
        let configs = payloads.configs(for: device)
        #expect(configs.count == 5 + 5 + 1)
        var uniqueIDs = Set<String>()
        for config in configs {
            let json = try #require(jsonObject(config.payload), "\(config.topic) is not JSON")
            let uniqueID = try #require(json["unique_id"] as? String)
            #expect(uniqueID.hasPrefix("keepalive_aabbccddee01_"))
            uniqueIDs.insert(uniqueID)
            let device = try #require(json["device"] as? [String: Any])
            #expect(device["identifiers"] as? [String] == ["keepalive_aabbccddee01"])
            #expect(device["connections"] as? [[String]] == [["mac", "AA:BB:CC:DD:EE:01"]])
            #expect(device["via_device"] as? String == "keepalive_gateway_gw")
            #expect(device["manufacturer"] as? String == "Acme")
            #expect(device["model"] as? String == "T1")
            #expect(device["sw_version"] as? String == "1.2")
            #expect((json["origin"] as? [String: Any])?["name"] as? String == "keepalive")
            #expect(config.topic.hasPrefix("homeassistant/") && config.topic.hasSuffix("/config"))
            #expect(config.topic.contains("/gw/aabbccddee01_"))
        }
        #expect(uniqueIDs.count == configs.count)
    }

    @Test func sensorsHaveAvailabilityOfGatewayAndDeviceWithModeAllAndExpireAfter() throws {
        for config in payloads.configs(for: device) where config.topic.contains("/sensor/") {
            let json = try #require(jsonObject(config.payload))
            let availability = try #require(json["availability"] as? [[String: Any]])
            #expect(
                availability.compactMap { $0["topic"] as? String } == [
                    "keepalive/gw/status", "keepalive/gw/kitchen/availability",
                ])
            #expect(json["availability_mode"] as? String == "all")
            if json["state_topic"] as? String == "keepalive/gw/kitchen/state" {
                #expect(json["expire_after"] as? Int == 90)
                #expect((json["value_template"] as? String)?.contains("value_json") == true)
            }
        }
    }

    @Test func readingSensorsCarryAPairHomeAssistantAccepts() throws {
        for config in payloads.configs(for: device) where config.topic.contains("/sensor/") {
            let json = try #require(jsonObject(config.payload))
            let deviceClass = json["device_class"] as? String
            let unit = json["unit_of_measurement"] as? String
            let stateClass = json["state_class"] as? String
            #expect(
                HomeAssistantAcceptedPairs.accepts(deviceClass: deviceClass, unit: unit, stateClass: stateClass),
                "\(config.topic): \(deviceClass ?? "-") \(unit ?? "-") \(stateClass ?? "-")")
        }
        let temperature = try #require(
            payloads.configs(for: device).first { $0.topic.hasSuffix("_temperature/config") })
        let json = try #require(jsonObject(temperature.payload))
        #expect(json["device_class"] as? String == "temperature")
        #expect(json["unit_of_measurement"] as? String == "°C")
        #expect(json["state_class"] as? String == "measurement")
        #expect(json["unique_id"] as? String == "keepalive_aabbccddee01_temperature")
        #expect(
            json["value_template"] as? String
                == """
                    {% if 'temperature' in value_json.get('readings', {}) %}{{ \
                    value_json.readings['temperature'].value }}{% endif %}
                    """
        )
        let pm = try #require(payloads.configs(for: device).first { $0.topic.hasSuffix("_pm2_5/config") })
        #expect(
            jsonObject(pm.payload)?["unit_of_measurement"] as? String == "\u{00B5}g/m³",
            "the micro sign every Home Assistant version accepts")
        let firmware = try #require(
            payloads.configs(for: device).first { $0.topic.hasSuffix("_firmware_revision/config") })
        let firmwareJSON = try #require(jsonObject(firmware.payload))
        #expect(firmwareJSON["state_class"] == nil && firmwareJSON["unit_of_measurement"] == nil)
    }

    @Test func diagnosticsAndThePollButton() throws {
        let configs = payloads.configs(for: device)
        for object in ["last_result", "consecutive_failures", "window_used", "link_time", "last_error"] {
            let config = try #require(
                configs.first { $0.topic == "homeassistant/sensor/gw/aabbccddee01_\(object)/config" })
            #expect(jsonObject(config.payload)?["entity_category"] as? String == "diagnostic")
        }
        let button = try #require(configs.first { $0.topic == "homeassistant/button/gw/aabbccddee01_poll/config" })
        let json = try #require(jsonObject(button.payload))
        #expect(json["command_topic"] as? String == "keepalive/gw/kitchen/poll")
        #expect(json["unique_id"] as? String == "keepalive_aabbccddee01_poll")
    }

    @Test func theGatewayIsADeviceWithAConnectivitySensorOnItsStatus() throws {
        let configs = payloads.gatewayConfigs()
        let status = try #require(configs.first { $0.topic == "homeassistant/binary_sensor/gw/gateway_status/config" })
        let json = try #require(jsonObject(status.payload))
        #expect(json["state_topic"] as? String == "keepalive/gw/status")
        #expect(json["device_class"] as? String == "connectivity")
        #expect((json["device"] as? [String: Any])?["identifiers"] as? [String] == ["keepalive_gateway_gw"])
    }

    @Test func jsonStringsAreEscaped() {
        var json = JSONObject()
        json.string("name", "a \"quoted\" \\ name\nwith\u{1} control")
        #expect(json.finished == #"{"name":"a \"quoted\" \\ name\nwith\u0001 control"}"#)
        #expect(jsonObject(json.bytes)?["name"] as? String == "a \"quoted\" \\ name\nwith\u{1} control")
    }
}
