import Basics
import MQTT
import Testing

@Suite struct ValueTests {
    @Test func backoffDoublesFromOneSecondToSixtyWithoutJitter() {
        let policy = MQTTReconnectPolicy(jitter: 0)
        var random = SplitMix64(seed: 1)
        let delays = (0..<9).map { policy.delay(beforeAttempt: $0, using: &random) }
        #expect(delays == [1, 2, 4, 8, 16, 32, 60, 60, 60].map { Duration.seconds($0) })
    }

    @Test func jitterStaysWithinTwentyPercentAndVaries() {
        let policy = MQTTReconnectPolicy()
        var random = SplitMix64(seed: 42)
        for attempt in 0..<12 {
            let base = policy.baseDelay(beforeAttempt: attempt)
            var seen = Set<Duration>()
            for _ in 0..<50 {
                let delay = policy.delay(beforeAttempt: attempt, using: &random)
                #expect(delay >= base * 0.8 && delay <= base * 1.2)
                seen.insert(delay)
            }
            #expect(seen.count > 40)
        }
        // The same seed gives the same delays.
        var first = SplitMix64(seed: 7)
        var second = SplitMix64(seed: 7)
        #expect(policy.delay(beforeAttempt: 3, using: &first) == policy.delay(beforeAttempt: 3, using: &second))
    }

    @Test(arguments: ["a/+/b", "a/#", "#", "+", "", "a\0b", "65536 bytes"])
    func invalidPublishTopicsAreRefusedBeforeAnythingIsSent(topic: String) async throws {
        let topic = topic == "65536 bytes" ? String(repeating: "x", count: 65_536) : topic
        // No broker: validation comes before the connection is even looked at.
        let client = try MQTTClient(configuration: MQTTConfiguration(host: "127.0.0.1", port: 1, clientID: "validator"))
        let error = await #expect(throws: MQTTError.self) { try await client.publish(topic: topic, payload: []) }
        #expect(error?.code == .invalidTopic)
        #expect(
            error?.message.contains("\"\(String(topic.prefix(200)).replacingOccurrences(of: "\0", with: "\\0"))")
                == true)
        await client.close()
    }

    @Test(arguments: ["a/b+", "a/#/b", "a#", "+a/b", ""])
    func invalidFiltersAreRefused(filter: String) async throws {
        let client = try MQTTClient(configuration: MQTTConfiguration(host: "127.0.0.1", port: 1, clientID: "validator"))
        let error = await #expect(throws: MQTTError.self) { try await client.subscribe(filter) }
        #expect(error?.code == .invalidTopic)
        await client.close()
    }

    @Test func validTopicsPassValidationAndThenFailOnlyForTheMissingConnection() async throws {
        let client = try MQTTClient(configuration: MQTTConfiguration(host: "127.0.0.1", port: 1, clientID: "validator"))
        for topic in ["a", "a/b/c", "/leading", "trailing/", "ü/ñ", String(repeating: "x", count: 65_535)] {
            let error = await #expect(throws: MQTTError.self) { try await client.publish(topic: topic, payload: []) }
            #expect(error?.code == .disconnected)
        }
        for filter in ["a/+/b", "a/#", "#", "+", "+/+"] {
            let error = await #expect(throws: MQTTError.self) { try await client.subscribe(filter) }
            #expect(error?.code == .disconnected)
        }
        await client.close()
    }

    @Test func aWillWithAnInvalidTopicIsRefusedAtInit() {
        let error = #expect(throws: MQTTError.self) {
            _ = try MQTTClient(
                configuration: MQTTConfiguration(
                    host: "127.0.0.1", clientID: "x", will: .init(topic: "status/#", payload: [])))
        }
        #expect(error?.code == .invalidTopic)
    }
}
