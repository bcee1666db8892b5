import LocalServices
import TestHarness
import Foundation
import Basics
import MQTT
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `MQTTClient.publish(batch:)`: one hop to the client's thread, the wire order of the batch, one outcome per
/// message.
@Suite struct BatchPublishTests {
    @Test func aBatchGoesOnTheWireInItsOrderAndEachMessageHasItsOwnOutcome() async throws {
        let broker = try await Broker.start()
        defer { broker.remove() }
        let subscriber = try MQTTClient(configuration: configuration(broker))
        let inbox = Inbox(subscriber)
        try await subscriber.connect()
        try await subscriber.subscribe("batch/#", qos: .atLeastOnce)

        let client = try MQTTClient(configuration: configuration(broker))
        try await client.connect()
        let count = 500  // past the client's maximum in flight (100): libmosquitto queues the rest, in order
        var messages = (0..<count).map { index in
            MQTTOutgoingMessage(topic: "batch/order", payload: "\(index)".bytes)
        }
        // A message of its own that fails leaves the others going.
        messages.insert(MQTTOutgoingMessage(topic: "batch/+/wildcard", payload: "bad".bytes), at: 100)
        let outcomes = await client.publish(batch: messages)
        #expect(outcomes.count == count + 1)
        for (index, outcome) in outcomes.enumerated() {
            switch outcome {
            case .success: #expect(index != 100)
            case .failure(let error):
                #expect(index == 100)
                #expect(error.code == .invalidTopic)
            }
        }
        try await waitUntil("the subscriber has the batch") { inbox.messages.count >= count }
        let received = inbox.messages.map { String(decoding: $0.payload, as: UTF8.self) }
        #expect(received == (0..<count).map { "\($0)" })
        #expect(await client.publish(batch: []).isEmpty)
        // QoS 0 completes when written, QoS 2 on PUBCOMP, in one batch.
        let mixed = await client.publish(batch: [
            MQTTOutgoingMessage(topic: "mixed/0", payload: [], qos: .atMostOnce),
            MQTTOutgoingMessage(topic: "mixed/2", payload: [], qos: .exactlyOnce),
            MQTTOutgoingMessage(topic: "mixed/1", payload: [], qos: .atLeastOnce),
        ])
        #expect(mixed.count == 3)
        #expect(mixed.allSatisfy { if case .success = $0 { true } else { false } })
        await client.close()
        await subscriber.close()
    }

    @Test func aConnectionLostMidBatchFailsTheUnacknowledgedRestWithDisconnected() async throws {
        let fake = try FakeBroker(.init(acknowledgedPublishes: 5))
        defer { fake.stop() }
        let client = try MQTTClient(configuration: MQTTConfiguration(
            host: "127.0.0.1", port: fake.port, clientID: "mid-batch",
            reconnect: MQTTReconnectPolicy(initialDelay: .seconds(30), maximumDelay: .seconds(30))))
        try await client.connect()
        let messages = (0..<20).map { MQTTOutgoingMessage(topic: "batch/lost", payload: "\($0)".bytes) }
        let outcomes = await client.publish(batch: messages)
        #expect(outcomes.count == 20)
        for (index, outcome) in outcomes.enumerated() {
            switch outcome {
            case .success: #expect(index < 5, "message \(index) was acknowledged")
            case .failure(let error):
                #expect(index >= 5, "message \(index) failed: \(error)")
                #expect(error.code == .disconnected)
            }
        }
        // The broker read them in the batch's order (up to the one it closed the connection at).
        let payloads = fake.publishedPayloads.map { String(decoding: $0, as: UTF8.self) }
        #expect(payloads.count >= 6)
        #expect(payloads == (0..<payloads.count).map { "\($0)" })

        // While the client is away (the reconnection is 30 s off), a batch fails whole and at once.
        let away = await client.publish(batch: messages)
        #expect(away.count == 20)
        #expect(away.allSatisfy { if case .failure(let error) = $0 { error.code == .disconnected } else { false } })
        await client.close()
        let closed = await client.publish(batch: messages)
        #expect(closed.allSatisfy { if case .failure(let error) = $0 { error.code == .closed } else { false } })
    }

    @Test func cancellingABatchFailsWhatIsStillWaitingWithCancelled() async throws {
        let broker = try await Broker.start()
        defer { broker.remove() }
        let client = try MQTTClient(configuration: configuration(broker))
        try await client.connect()
        broker.signal(SIGSTOP)
        defer { broker.signal(SIGCONT) }
        let outcome = Locked([Result<Void, MQTTError>]?.none)
        let task = Task {
            let results = await client.publish(
                batch: (0..<10).map { MQTTOutgoingMessage(topic: "never/acked", payload: "\($0)".bytes) })
            outcome.withLock { $0 = results }
        }
        task.cancel()
        try await waitUntil("the cancelled batch returns") { outcome.withLock { $0 != nil } }
        let results = outcome.withLock { $0 } ?? []
        #expect(results.count == 10)
        #expect(results.allSatisfy { if case .failure(let error) = $0 { error.code == .cancelled } else { false } })
        broker.signal(SIGCONT)
        await client.close()
    }
}
