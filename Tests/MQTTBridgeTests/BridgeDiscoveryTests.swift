import LocalServices
import TestHarness
import Foundation
import MQTT
@testable import MQTTBridge
import Readings
import Testing

@Suite struct BridgeDiscoveryTests {
    @Test func homeAssistantComingOnlineGetsDiscoveryAgain() async throws {
        let broker = try await MosquittoBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer {
            broker.remove()
            removeDirectory(directory)
        }
        let subscriber = try await Collector(port: broker.port, filters: ["homeassistant/+/gw/#"])
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(port: broker.port, directory: directory), devices: [kitchen],
            logger: testLogger())
        let running = RunningBridge(bridge)
        let topic = "homeassistant/sensor/gw/aabbccddee01_temperature/config"
        try await subscriber.wait(for: topic)
        try await waitUntil("the bridge listens for Home Assistant") {
            broker.log.contains("homeassistant/status (QoS 1)")
        }
        let before = subscriber.messages(on: topic).count
        let homeAssistant = try await Collector(port: broker.port, filters: [])
        try await homeAssistant.client.publish(
            topic: "homeassistant/status", payload: Array("online".utf8), retain: false)
        try await waitUntil("discovery is published again") { subscriber.messages(on: topic).count > before }
        // The gateway's own device too, and every entity of the device.
        try await waitUntil("the gateway is announced again") {
            subscriber.messages(on: "homeassistant/binary_sensor/gw/gateway_status/config").count >= 2
        }
        try await waitUntil("the poll button is announced again") {
            subscriber.messages(on: "homeassistant/button/gw/aabbccddee01_poll/config").count >= 2
        }
        await homeAssistant.close()
        await subscriber.close()
        await running.stop()
    }

    @Test func aRemovedDeviceHasItsConfigsClearedAtTheNextStartAndLearnedReadingsComeBack() async throws {
        let broker = try await MosquittoBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer {
            broker.remove()
            removeDirectory(directory)
        }
        let cellarTopics = [
            "homeassistant/sensor/gw/aabbccddee02_last_result/config",
            "homeassistant/sensor/gw/aabbccddee02_consecutive_failures/config",
            "homeassistant/sensor/gw/aabbccddee02_window_used/config",
            "homeassistant/sensor/gw/aabbccddee02_link_time/config",
            "homeassistant/sensor/gw/aabbccddee02_last_error/config",
            "homeassistant/button/gw/aabbccddee02_poll/config",
        ]
        let pressureTopic = "homeassistant/sensor/gw/aabbccddee01_pressure/config"
        do {
            let bridge = try MQTTBridge(
                configuration: bridgeConfiguration(port: broker.port, directory: directory),
                devices: [kitchen, cellar],
                logger: testLogger())
            let running = RunningBridge(bridge)
            try await running.waitUntilConnected()
            // A reading known only at run time (a 0x2904 name): announced when a record first carries it.
            try bridge.submit(
                device: "kitchen", sequence: 0, succeeded: true,
                readings: [Reading(name: "pressure", value: .number(101_325), unit: "Pa")], payload: recordPayload(0))
            let seen = try await Collector(port: broker.port, filters: ["homeassistant/#"])
            for topic in cellarTopics + [pressureTopic] { try await seen.wait(for: topic) }
            await seen.close()
            await running.stop()
        }

        let subscriber = try await MosquittoSubscriber(broker: broker, filters: ["homeassistant/#"])
        defer { subscriber.stop() }
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(port: broker.port, directory: directory), devices: [kitchen],
            logger: testLogger())
        let running = RunningBridge(bridge)
        for topic in cellarTopics {
            let cleared = try await subscriber.wait(for: topic) { $0.isEmpty }
            #expect(cleared.retain && cleared.qos == 1)
        }
        // Announced again from the discovery state file, before any record of this run carries it.
        let pressure = try await subscriber.wait(for: pressureTopic) { !$0.isEmpty }
        #expect(jsonObject(Array(pressure.payload.utf8))?["device_class"] as? String == "pressure")
        await running.stop()

        // A late subscriber finds no retained config of the removed device.
        let late = try await Collector(port: broker.port, filters: ["homeassistant/#"])
        try await late.wait(for: pressureTopic)
        #expect(late.messages.filter { $0.topic.contains("aabbccddee02") }.isEmpty)
        await late.close()
    }
}

/// A device shared by a fleet: announced by the gateway that holds it, under the shared node id, with a holder
/// sensor; never cleared by a gateway that does not hold it.
@Suite struct SharedDeviceDiscoveryTests {
    @Test func onlyTheHolderAnnouncesASharedDeviceAndNobodyElseClearsIt() async throws {
        let broker = try await MosquittoBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer {
            broker.remove()
            removeDirectory(directory)
        }
        var shared = kitchen
        shared.shared = true
        let subscriber = try await Collector(port: broker.port, filters: ["homeassistant/#"])
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(port: broker.port, directory: directory), devices: [shared],
            logger: testLogger())
        let running = RunningBridge(bridge)
        try await running.waitUntilConnected()
        try await subscriber.wait(for: "homeassistant/binary_sensor/gw/gateway_status/config")
        let holderTopic = "homeassistant/sensor/keepalive_shared/aabbccddee01_holder/config"
        let temperatureTopic = "homeassistant/sensor/keepalive_shared/aabbccddee01_temperature/config"
        #expect(subscriber.messages(on: temperatureTopic).isEmpty, "not announced while another gateway may hold it")
        #expect(
            !subscriber.messages.contains { $0.topic.contains("/gw/aabbccddee01") }, "never under the gateway's node id"
        )

        bridge.holdChanged(device: "kitchen", holding: true)
        try await subscriber.wait(for: holderTopic)
        let temperature = try await subscriber.wait(for: temperatureTopic)
        let config = try #require(jsonObject(temperature.payload))
        #expect(config["state_topic"] as? String == "keepalive/gw/kitchen/state", "the holder's own topics")
        #expect(
            config["unique_id"] as? String == "keepalive_aabbccddee01_temperature", "the same entity on every gateway")
        let holderMessage = try #require(subscriber.messages(on: holderTopic).last)
        let holder = try #require(jsonObject(holderMessage.payload))
        #expect((holder["value_template"] as? String)?.contains("value_json.holder") == true)

        // Handed over: this gateway stops announcing it, and a full re-announcement does not clear the config
        // the new holder has published meanwhile.
        bridge.holdChanged(device: "kitchen", holding: false)
        let homeAssistant = try await Collector(port: broker.port, filters: [])
        let before = subscriber.messages(on: "homeassistant/binary_sensor/gw/gateway_status/config").count
        try await homeAssistant.client.publish(
            topic: "homeassistant/status", payload: Array("online".utf8), retain: false)
        try await waitUntil("announced again") {
            subscriber.messages(on: "homeassistant/binary_sensor/gw/gateway_status/config").count > before
        }
        #expect(subscriber.messages(on: temperatureTopic).allSatisfy { !$0.payload.isEmpty }, "never cleared")
        #expect(
            subscriber.messages(on: temperatureTopic).count == 1,
            "not announced again by a gateway that does not hold it")
        await homeAssistant.close()
        await subscriber.close()
        await running.stop()
    }
}

/// The daemon's health line on `<prefix>/<gateway>/health`, retained, with a Home Assistant sensor on the gateway.
@Suite struct HealthTopicTests {
    @Test func theHealthLineIsPublishedRetainedAndAnnounced() async throws {
        let broker = try await MosquittoBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer {
            broker.remove()
            removeDirectory(directory)
        }
        let subscriber = try await Collector(
            port: broker.port, filters: ["keepalive/gw/health", "homeassistant/sensor/gw/gateway_health/config"])
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(port: broker.port, directory: directory), devices: [kitchen],
            logger: testLogger())
        let running = RunningBridge(bridge)
        try await running.waitUntilConnected()
        let config = try await subscriber.wait(for: "homeassistant/sensor/gw/gateway_health/config")
        #expect(jsonObject(config.payload)?["state_topic"] as? String == "keepalive/gw/health")
        bridge.healthChanged("hci0 unhealthy: 3 failing rounds — polling 1 device every 30s")
        let health = try await subscriber.wait(for: "keepalive/gw/health") { !$0.payload.isEmpty }
        #expect(String(decoding: health.payload, as: UTF8.self).hasPrefix("hci0 unhealthy"))
        bridge.healthChanged("hci0 unhealthy: 3 failing rounds — polling 1 device every 30s")
        bridge.healthChanged("polling 1 device every 30s")
        try await subscriber.wait(for: "keepalive/gw/health") {
            String(decoding: $0.payload, as: UTF8.self) == "polling 1 device every 30s"
        }
        // A line is published when it changes (the connection's announcement may repeat the one in force).
        var lines: [String] = []
        for message in subscriber.messages(on: "keepalive/gw/health") {
            let line = String(decoding: message.payload, as: UTF8.self)
            if lines.last != line { lines.append(line) }
        }
        #expect(
            lines == ["hci0 unhealthy: 3 failing rounds — polling 1 device every 30s", "polling 1 device every 30s"])
        // Retained: a late subscriber finds the last line.
        let late = try await Collector(port: broker.port, filters: ["keepalive/gw/health"])
        let retained = try await late.wait(for: "keepalive/gw/health")
        #expect(retained.retain && String(decoding: retained.payload, as: UTF8.self) == "polling 1 device every 30s")
        await late.close()
        await subscriber.close()
        await running.stop()
    }
}
