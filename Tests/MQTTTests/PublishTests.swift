import LocalServices
import TestHarness
import Foundation
import Basics
import MQTT
import Testing

@Suite struct PublishTests {
    @Test func publishesAtEachQoSToAnIndependentSubscriberWithTheRetainFlagAsSent() async throws {
        let broker = try await Broker.start()
        defer { broker.remove() }
        // mosquitto_sub as MQTT 5 with retain-as-published, so the retain flag arrives as it was sent; the broker
        // logs its SUBSCRIBE (log_type all) before it handles anything else. No `-W`: it counts from mosquitto_sub's
        // start, so under ThreadSanitizer, with the pool busy with the suite's start, it once ended before the third
        // message was published; the give-up is `waitForExit`'s, from the last publish, and the kill below.
        let subscriber = try Watched([
            "mosquitto_sub", "-h", "127.0.0.1", "-p", "\(broker.port)", "-V", "mqttv5", "--retain-as-published",
            "-q", "2", "-t", "qos/#", "-C", "3", "-F", "MSG %t|%q|%r|%p",
        ])
        defer { subscriber.kill(SIGKILL) }
        try await waitUntil("mosquitto_sub is subscribed") { broker.log.contains("Received SUBSCRIBE") }

        let client = try MQTTClient(configuration: configuration(broker))
        let result = try await client.connect()
        #expect(result.protocolVersion == .v5)
        try await client.publish(topic: "qos/0", payload: "zero".bytes, qos: .atMostOnce, retain: false)
        try await client.publish(topic: "qos/1", payload: "one".bytes, qos: .atLeastOnce, retain: true)
        try await client.publish(topic: "qos/2", payload: "two".bytes, qos: .exactlyOnce, retain: false)
        #expect(try await subscriber.waitForExit(within: .seconds(20)) == 0)
        let lines = subscriber.output.split(separator: "\n").filter { $0.hasPrefix("MSG ") }.map { $0.dropFirst(4) }
        #expect(lines.sorted() == ["qos/0|0|0|zero", "qos/1|1|1|one", "qos/2|2|0|two"])
        await client.close()
    }

    @Test func aRetainedMessageReachesALateSubscriber() async throws {
        let broker = try await Broker.start()
        defer { broker.remove() }
        let client = try MQTTClient(configuration: configuration(broker))
        try await client.connect()
        try await client.publish(topic: "state/kitchen", payload: "online".bytes, qos: .atLeastOnce, retain: true)
        let output = try await run([
            "mosquitto_sub", "-h", "127.0.0.1", "-p", "\(broker.port)", "-t", "state/#", "-C", "1",
            "-W", "\(10 * Sanitizers.slowdown)", "-F", "%t|%r|%p",
        ])
        #expect(output == "state/kitchen|1|online\n")
        await client.close()
    }

    @Test func ownSubscriptionReceivesMQTT5UserPropertiesAndMessageExpiry() async throws {
        let broker = try await Broker.start()
        defer { broker.remove() }
        let subscriber = try MQTTClient(configuration: configuration(broker))
        let inbox = Inbox(subscriber)
        try await subscriber.connect()
        #expect(try await subscriber.subscribe("readings/#", qos: .exactlyOnce) == .exactlyOnce)

        let publisher = try MQTTClient(configuration: configuration(broker))
        try await publisher.connect()
        let properties = MQTTProperties(
            messageExpiryInterval: 300, contentType: "application/json",
            userProperties: [
                MQTTUserProperty(name: "unit", value: "°C"), MQTTUserProperty(name: "sensor", value: "a1"),
            ])
        try await publisher.publish(
            topic: "readings/kitchen", payload: #"{"t":21.5}"#.bytes, qos: .atLeastOnce, properties: properties)
        let message = try await inbox.first(on: "readings/kitchen")
        #expect(message.payload == #"{"t":21.5}"#.bytes)
        #expect(message.qos == .atLeastOnce)
        #expect(message.properties.userProperties == properties.userProperties)
        #expect(message.properties.contentType == "application/json")
        // The broker counts the expiry down by the time the message spent with it.
        let expiry = try #require(message.properties.messageExpiryInterval)
        #expect(expiry <= 300 && expiry >= 290)
        await publisher.close()
        await subscriber.close()
    }

    @Test func underMQTT311PropertiesAreSilentlyNotSent() async throws {
        let broker = try await Broker.start()
        defer { broker.remove() }
        let subscriber = try MQTTClient(configuration: configuration(broker))
        let inbox = Inbox(subscriber)
        try await subscriber.connect()
        try await subscriber.subscribe("old/#")
        let publisher = try MQTTClient(configuration: configuration(broker, protocolVersion: .v311))
        #expect(try await publisher.connect().protocolVersion == .v311)
        try await publisher.publish(
            topic: "old/kitchen", payload: "21.5".bytes,
            properties: MQTTProperties(
                messageExpiryInterval: 60, userProperties: [MQTTUserProperty(name: "a", value: "b")]))
        let message = try await inbox.first(on: "old/kitchen")
        #expect(message.payload == "21.5".bytes)
        #expect(message.properties.isEmpty)
        await publisher.close()
        await subscriber.close()
    }

    @Test func manyConcurrentPublishesAllComplete() async throws {
        let broker = try await Broker.start()
        defer { broker.remove() }
        let client = try MQTTClient(configuration: configuration(broker))
        try await client.connect()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<300 {
                group.addTask {
                    let qos = MQTTQoS(rawValue: UInt8(index % 3))!
                    try await client.publish(topic: "bulk/\(index)", payload: "\(index)".bytes, qos: qos)
                }
            }
            try await group.waitForAll()
        }
        await client.close()
    }

    /// 500 QoS 1 publishes one after another, each returning at its PUBACK, reach an independent subscriber
    /// once each and in order. The mean round trip is printed, not asserted: it is a figure for a benchmark (in
    /// the whole suite on two loaded cores it has read 52 ms, against 0.12 ms alone).
    @Test func qos1RoundTripOnLoopback() async throws {
        let broker = try await Broker.start()
        defer { broker.remove() }
        let count = 500
        let subscriber = try Watched([
            "mosquitto_sub", "-h", "127.0.0.1", "-p", "\(broker.port)", "-q", "1", "-t", "bench", "-C", "\(count)",
            "-F", "%p",
        ])
        defer { subscriber.kill(SIGKILL) }
        try await waitUntil("mosquitto_sub is subscribed") { broker.log.contains("Received SUBSCRIBE") }
        let client = try MQTTClient(configuration: configuration(broker))
        try await client.connect()
        let clock = ContinuousClock()
        let started = clock.now
        for index in 0..<count {
            try await client.publish(topic: "bench", payload: "\(index)".bytes, qos: .atLeastOnce)
        }
        let elapsed = clock.now - started
        let microseconds = Double(elapsed.components.seconds) * 1e6 + Double(elapsed.components.attoseconds) / 1e12
        print("QoS 1 publish round trip on loopback: \(Int(microseconds / Double(count))) µs (mean of \(count))")
        #expect(try await subscriber.waitForExit(within: .seconds(20)) == 0)
        let payloads = subscriber.output.split(separator: "\n").map(String.init)
        #expect(payloads == (0..<count).map(String.init), "\(payloads.count) payloads")
        await client.close()
    }
}
