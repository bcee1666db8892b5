import LocalServices
import TestHarness
import Foundation
import Basics
import MQTT

#if canImport(Glibc)
    import Glibc
#endif

/// The shared mosquitto helper (Sources/LocalServices/MosquittoBroker.swift), under the names these tests use.
typealias Broker = MosquittoBroker
typealias Watched = WatchedProcess

func freePort() throws -> Int { try freeLoopbackPort() }

/// Runs a command to its end, failing the test with its output when it fails.
@discardableResult
func run(_ arguments: [String]) async throws -> String {
    let output = try await Subprocess.run(arguments)
    guard output.status == 0 else {
        throw CommandFailed(
            description: "\(arguments.joined(separator: " ")) → \(output.status): \(output.standardError)")
    }
    return output.standardOutput
}

struct CommandFailed: Error, CustomStringConvertible {
    var description: String
}

/// A client configuration for `broker`, with a unique client id and a fast reconnection for tests.
func configuration(
    _ broker: Broker, clientID: String = "test-\(UInt32.random(in: 0...UInt32.max))",
    keepAlive: Duration = .seconds(60),
    will: MQTTConfiguration.Will? = nil, protocolVersion: MQTTProtocolVersion = .v5
) -> MQTTConfiguration {
    MQTTConfiguration(
        host: "127.0.0.1", port: broker.port, clientID: clientID, keepAlive: keepAlive,
        protocolVersion: protocolVersion, will: will,
        reconnect: MQTTReconnectPolicy(initialDelay: .milliseconds(50), maximumDelay: .milliseconds(200)))
}

/// Collects a client's messages as they come, for conditions to wait on.
final class Inbox: Sendable {
    private let received = Locked([MQTTMessage]())
    private let task: Task<Void, Never>

    init(_ client: MQTTClient) {
        let received = self.received
        task = Task {
            for await message in client.messages { received.withLock { $0.append(message) } }
        }
    }

    var messages: [MQTTMessage] { received.withLock { $0 } }

    func first(on topic: String, within limit: Duration = .seconds(10)) async throws -> MQTTMessage {
        try await waitUntil("a message on \(topic)", timeout: limit) { self.messages.contains { $0.topic == topic } }
        return messages.first { $0.topic == topic }!
    }

    deinit { task.cancel() }
}

/// Collects a client's connection events.
final class EventLog: Sendable {
    private let received = Locked([MQTTConnectionEvent]())
    private let task: Task<Void, Never>

    init(_ client: MQTTClient) {
        let received = self.received
        task = Task {
            for await event in client.events { received.withLock { $0.append(event) } }
        }
    }

    var events: [MQTTConnectionEvent] { received.withLock { $0 } }

    var connections: Int { events.filter { if case .connected = $0 { true } else { false } }.count }
    var disconnections: Int { events.filter { if case .disconnected = $0 { true } else { false } }.count }

    deinit { task.cancel() }
}

extension String {
    var bytes: [UInt8] { Array(utf8) }
}
