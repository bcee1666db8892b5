import LocalServices
import TestHarness
import Foundation
import MQTT
import Testing

@Suite struct WillTests {
    @Test func theWillIsPublishedWhenTheConnectionDropsWithoutDisconnect() async throws {
        let broker = try await Broker.start()
        defer { broker.remove() }
        let watcher = try MQTTClient(configuration: configuration(broker))
        let inbox = Inbox(watcher)
        try await watcher.connect()
        try await watcher.subscribe("status/#")

        let will = MQTTConfiguration.Will(
            topic: "status/crashy", payload: "offline".bytes, qos: .atLeastOnce, retain: false)
        let crashy = try MQTTClient(configuration: configuration(broker, will: will))
        try await crashy.connect()
        try await crashy.publish(topic: "status/crashy", payload: "online".bytes)
        await crashy.dropConnectionForTesting()
        try await waitUntil("the will arrives") {
            inbox.messages.contains { $0.topic == "status/crashy" && $0.payload == "offline".bytes }
        }
        await crashy.close()
        await watcher.close()
    }

    @Test func theWillIsNotPublishedOnAGracefulClose() async throws {
        let broker = try await Broker.start()
        defer { broker.remove() }
        let watcher = try MQTTClient(configuration: configuration(broker))
        let inbox = Inbox(watcher)
        try await watcher.connect()
        try await watcher.subscribe("status/#")

        let will = MQTTConfiguration.Will(
            topic: "status/polite", payload: "died".bytes, qos: .atLeastOnce, retain: false)
        let polite = try MQTTClient(configuration: configuration(broker, clientID: "polite", will: will))
        try await polite.connect()
        await polite.close(publishing: [
            MQTTOutgoingMessage(topic: "status/polite", payload: "offline".bytes, retain: true)
        ])
        // Once the broker has logged the normal DISCONNECT, any will would already be on its way to the
        // watcher; a marker published after that comes after it.
        try await waitUntil("the broker saw DISCONNECT") { broker.log.contains("Client polite disconnected.") }
        try await watcher.publish(topic: "status/marker", payload: [], qos: .atLeastOnce)
        _ = try await inbox.first(on: "status/marker")
        let polites = inbox.messages.filter { $0.topic == "status/polite" }.map {
            String(decoding: $0.payload, as: UTF8.self)
        }
        #expect(polites == ["offline"])
        await watcher.close()
    }
}
