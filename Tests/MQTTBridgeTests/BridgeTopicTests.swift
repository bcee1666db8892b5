import LocalServices
import TestHarness
import Foundation
import Logging
import MQTT
@testable import MQTTBridge
import Readings
import ServiceLifecycle
import Testing

@Suite struct BridgeTopicTests {
    @Test func everyTopicArrivesWithItsPayloadRetainFlagAndQoS() async throws {
        let broker = try await MosquittoBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer {
            broker.remove()
            removeDirectory(directory)
        }
        let subscriber = try await MosquittoSubscriber(broker: broker, filters: ["keepalive/#", "homeassistant/#"])
        defer { subscriber.stop() }
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(port: broker.port, directory: directory), devices: [kitchen, cellar],
            logger: testLogger())
        let group = ServiceGroup(services: [bridge], logger: testLogger())
        let running = Task { try await group.run() }

        let status = try await subscriber.wait(for: "keepalive/gw/status") { $0 == "online" }
        #expect(status.retain && status.qos == 1)
        let interval = try await subscriber.wait(for: "keepalive/gw/kitchen/interval")
        #expect(interval.payload == "30s" && interval.retain && interval.qos == 1)
        let dropped = try await subscriber.wait(for: "keepalive/gw/dropped")
        #expect(dropped.payload == "0" && dropped.retain && dropped.qos == 1)
        let temperatureConfig = try await subscriber.wait(
            for: "homeassistant/sensor/gw/aabbccddee01_temperature/config")
        #expect(temperatureConfig.retain && temperatureConfig.qos == 1)
        #expect(jsonObject(Array(temperatureConfig.payload.utf8))?["device_class"] as? String == "temperature")
        let gatewayConfig = try await subscriber.wait(for: "homeassistant/binary_sensor/gw/gateway_status/config")
        #expect(gatewayConfig.retain)

        let payload = recordPayload(0)
        try bridge.submit(
            device: "kitchen", sequence: 0, succeeded: true,
            readings: [Reading(name: "temperature", value: .number(21.5), unit: "°C")], payload: payload)
        let state = try await subscriber.wait(for: "keepalive/gw/kitchen/state")
        #expect(state.payload == String(decoding: payload, as: UTF8.self))
        #expect(!state.retain && state.qos == 1)
        let availability = try await subscriber.wait(for: "keepalive/gw/kitchen/availability")
        #expect(availability.payload == "online" && availability.retain && availability.qos == 1)
        let failures = try await subscriber.wait(for: "keepalive/gw/kitchen/failures")
        #expect(failures.payload == "0" && failures.retain)

        // Three polls that found no connection slot (succeeded nil): delivered, but they say nothing about the
        // device: neither its failures nor its availability move.
        for sequence in 1...3 {
            try bridge.submit(
                device: "kitchen", sequence: UInt64(sequence), succeeded: nil, payload: recordPayload(UInt64(sequence)))
        }
        try await subscriber.wait(for: "keepalive/gw/kitchen/state") { $0.contains("\"seq\":3,") }
        // Three failed polls: online twice more, then offline (and the count on its topic).
        for sequence in 4...6 {
            try bridge.submit(
                device: "kitchen", sequence: UInt64(sequence), succeeded: false,
                payload: recordPayload(UInt64(sequence)))
        }
        try await subscriber.wait(for: "keepalive/gw/kitchen/failures") { $0 == "3" }
        #expect(
            subscriber.lines.filter { $0.topic == "keepalive/gw/kitchen/failures" }.map(\.payload) == [
                "0", "1", "2", "3",
            ])
        let offline = try await subscriber.wait(for: "keepalive/gw/kitchen/availability") { $0 == "offline" }
        #expect(offline.retain && offline.qos == 1)
        #expect(
            subscriber.lines.filter { $0.topic == "keepalive/gw/kitchen/availability" }.map(\.payload) == [
                "online", "offline",
            ])

        // A new reading name: its sensor is announced the first time a record carries it.
        try bridge.submit(
            device: "cellar", sequence: 7, succeeded: true,
            readings: [Reading(name: "pm2_5", value: .number(3), unit: "µg/m³")],
            payload: recordPayload(7, device: "cellar"))
        let pm = try await subscriber.wait(for: "homeassistant/sensor/gw/aabbccddee02_pm2_5/config")
        #expect(jsonObject(Array(pm.payload.utf8))?["device_class"] as? String == "pm25")

        // The device's interval changes: echoed, and expire_after re-announced.
        bridge.intervalChanged(device: "kitchen", to: .seconds(120))
        try await subscriber.wait(for: "keepalive/gw/kitchen/interval") { $0 == "2m" }
        try await subscriber.wait(for: "homeassistant/sensor/gw/aabbccddee01_temperature/config") {
            jsonObject(Array($0.utf8))?["expire_after"] as? Int == 360
        }

        await group.triggerGracefulShutdown()
        try await running.value
        let last = try await subscriber.wait(for: "keepalive/gw/status") { $0 == "offline" }
        #expect(last.retain && last.qos == 1)
    }

    @Test func theWillSaysOfflineWhenTheBridgeVanishes() async throws {
        let broker = try await MosquittoBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer {
            broker.remove()
            removeDirectory(directory)
        }
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(port: broker.port, directory: directory), devices: [kitchen],
            logger: testLogger())
        #expect(bridge.configuration.mqtt.will?.topic == "keepalive/gw/status")
        #expect(bridge.configuration.mqtt.will?.payload == Array("offline".utf8))
        #expect(bridge.configuration.mqtt.will?.retain == true)
        #expect(bridge.configuration.mqtt.clientID == "keepalive-gw")
        #expect(bridge.configuration.mqtt.cleanStart == false)
    }
}

@Suite struct BridgeRefusalTests {
    @Test func aTopicTheBrokerForbidsDoesNotHideTheRestOfTheAnnouncement() async throws {
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        let brokerDirectory = try makeTemporaryDirectory(prefix: "bridge-broker")
        defer {
            removeDirectory(directory)
            removeDirectory(brokerDirectory)
        }
        try """
        topic readwrite #
        topic deny homeassistant/sensor/gw/aabbccddee01_humidity/config
        topic deny keepalive/gw/+/poll

        """.write(toFile: brokerDirectory + "/acl", atomically: true, encoding: .utf8)
        let broker = try await MosquittoBroker.start(
            directory: brokerDirectory, listener: "allow_anonymous true\nacl_file \(brokerDirectory)/acl")
        defer { broker.remove() }
        let subscriber = try await Collector(port: broker.port, filters: ["homeassistant/#", "keepalive/#"])
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(port: broker.port, directory: directory), devices: [kitchen],
            logger: testLogger())
        let running = RunningBridge(bridge)
        // Refused: the humidity config (PUBACK "not authorized"); everything after it still arrives.
        try await subscriber.wait(for: "homeassistant/button/gw/aabbccddee01_poll/config")
        try await subscriber.wait(for: "keepalive/gw/dropped")
        #expect(subscriber.messages(on: "homeassistant/sensor/gw/aabbccddee01_humidity/config").isEmpty)
        try bridge.submit(device: "kitchen", sequence: 0, succeeded: true, payload: recordPayload(0))
        try await subscriber.wait(for: "keepalive/gw/kitchen/state")
        await subscriber.close()
        await running.stop()
    }
}
