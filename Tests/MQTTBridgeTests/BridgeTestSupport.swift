import LocalServices
import TestHarness
import Foundation
import Basics
import Logging
import MQTT
@testable import MQTTBridge

#if canImport(Glibc)
    import Glibc
#endif

/// A fast reconnection for tests (no jitter, so margins are what they say).
func fastReconnect(_ initial: Duration = .milliseconds(50), maximum: Duration = .milliseconds(200))
    -> MQTTReconnectPolicy
{
    MQTTReconnectPolicy(initialDelay: initial, maximumDelay: maximum, jitter: 0)
}

/// A bridge configuration for a broker on 127.0.0.1:`port`, gateway `gw`, spool in `directory`.
func bridgeConfiguration(
    port: Int, directory: String, reconnect: MQTTReconnectPolicy = fastReconnect(),
    syncPolicy: BridgeConfiguration.SyncPolicy = .never, spoolLimit: Int = 16 << 20
) -> BridgeConfiguration {
    BridgeConfiguration(
        mqtt: MQTTConfiguration(host: "127.0.0.1", port: port, clientID: "", reconnect: reconnect), gateway: "gw",
        spoolDirectory: directory, spoolLimitBytes: spoolLimit, syncPolicy: syncPolicy)
}

let kitchen = BridgeDevice(
    name: "kitchen", address: "AA:BB:CC:DD:EE:01", manufacturer: "Acme", model: "T1", interval: .seconds(30),
    expectedReadings: [.init(name: "temperature", unit: "°C"), .init(name: "humidity", unit: "%")])
let cellar = BridgeDevice(name: "cellar", address: "AA:BB:CC:DD:EE:02", interval: .seconds(60))

func testLogger(_ label: String = "bridge-test") -> Logger {
    var logger = Logger(label: label)
    logger.logLevel = ProcessInfo.processInfo.environment["BRIDGE_TEST_LOG"] == nil ? .critical : .debug
    return logger
}

/// A record payload like the daemon's JSON line (with `seq`), small and easy to check.
func recordPayload(_ sequence: UInt64, device: String = "kitchen", temperature: Double = 21.5) -> [UInt8] {
    Array(
        (#"{"seq":\#(sequence),"device":"\#(device)","result":"newData","#
            + #""readings":{"temperature":{"value":\#(temperature),"unit":"°C"}}}"#).utf8)
}

/// Runs a bridge in a task; `stop()` cancels it (which still publishes `offline` and closes).
final class RunningBridge: Sendable {
    let bridge: MQTTBridge
    private let task: Task<Void, any Error>

    init(_ bridge: MQTTBridge) {
        self.bridge = bridge
        task = Task { try await bridge.run() }
    }

    func stop() async {
        task.cancel()
        _ = try? await task.value
    }

    func waitUntilConnected() async throws {
        try await waitUntil("the bridge is connected", timeout: .seconds(15)) { self.bridge.statistics.connected }
    }

    func waitUntilDrained() async throws {
        try await waitUntil("the spool is delivered", timeout: .seconds(30)) {
            let statistics = self.bridge.statistics
            return statistics.pending == 0 && statistics.connected
        }
    }
}

/// An independent subscriber: a second MQTT client collecting every message, for conditions to wait on.
final class Collector: Sendable {
    let client: MQTTClient
    private let received = Locked([MQTTMessage]())
    private let task: Task<Void, Never>

    init(port: Int, filters: [String], qos: MQTTQoS = .exactlyOnce, clientID: String? = nil, cleanStart: Bool = true)
        async throws
    {
        client = try MQTTClient(
            configuration: MQTTConfiguration(
                host: "127.0.0.1", port: port, clientID: clientID ?? "collector-\(UInt32.random(in: 0...UInt32.max))",
                cleanStart: cleanStart, reconnect: fastReconnect()))
        let received = self.received
        let client = self.client
        task = Task { for await message in client.messages { received.withLock { $0.append(message) } } }
        try await client.connect()
        for filter in filters { try await client.subscribe(filter, qos: qos) }
    }

    var messages: [MQTTMessage] { received.withLock { $0 } }

    func messages(on topic: String) -> [MQTTMessage] { messages.filter { $0.topic == topic } }

    /// Waits for a message on `topic` satisfying `condition` and returns the last such one.
    @discardableResult
    func wait(
        for topic: String, within limit: Duration = .seconds(10),
        where condition: @escaping @Sendable (MQTTMessage) -> Bool = { _ in true }
    ) async throws -> MQTTMessage {
        try await waitUntil("a message on \(topic)", timeout: limit) {
            self.messages(on: topic).contains(where: condition)
        }
        return messages(on: topic).last(where: condition)
            ?? MQTTMessage(topic: topic, payload: [], qos: .atMostOnce, retain: false)
    }

    /// The `seq` of each state message on `topic`, in arrival order.
    func sequences(on topic: String) -> [UInt64] {
        messages(on: topic).compactMap { message in
            guard let object = try? JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any] else {
                return nil
            }
            return (object["seq"] as? NSNumber)?.uint64Value
        }
    }

    func close() async {
        task.cancel()
        await client.close()
    }
}

/// `mosquitto_sub -v` as MQTT 5 with retain-as-published, printing `topic|qos|retain|payload` per message.
final class MosquittoSubscriber: Sendable {
    let process: WatchedProcess

    init(broker: MosquittoBroker, filters: [String]) async throws {
        // The broker's log holds earlier clients' subscriptions too: wait for one more of each.
        @Sendable func count(_ filter: String) -> Int { broker.log.components(separatedBy: filter + " (QoS 2)").count }
        let before = Dictionary(uniqueKeysWithValues: filters.map { ($0, count($0)) })
        process = try WatchedProcess(
            [
                "mosquitto_sub", "-h", "127.0.0.1", "-p", "\(broker.port)", "-V", "mqttv5", "--retain-as-published",
                "-q", "2",
            ]
                + filters.flatMap { ["-t", $0] } + ["-F", "MSG %t|%q|%r|%p"])
        let process = self.process
        try await waitUntil("mosquitto_sub is subscribed") {
            filters.allSatisfy { count($0) > before[$0, default: 0] } || process.exitStatus != nil
        }
    }

    /// Waits for a line on `topic` whose payload satisfies `condition`.
    @discardableResult
    func wait(
        for topic: String, within limit: Duration = .seconds(10),
        where condition: @escaping @Sendable (String) -> Bool = { _ in true }
    ) async throws -> (topic: String, qos: Int, retain: Bool, payload: String) {
        try await waitUntil("mosquitto_sub prints a message on \(topic)", timeout: limit) {
            self.lines.contains { $0.topic == topic && condition($0.payload) }
        }
        return lines.last { $0.topic == topic && condition($0.payload) } ?? (topic, -1, false, "")
    }

    /// Every line as (topic, qos, retain, payload).
    var lines: [(topic: String, qos: Int, retain: Bool, payload: String)] {
        process.output.split(separator: "\n").filter { $0.hasPrefix("MSG ") }.compactMap { line in
            let fields = line.dropFirst(4).split(separator: "|", maxSplits: 3, omittingEmptySubsequences: false)
            guard fields.count == 4, let qos = Int(fields[1]) else { return nil }
            return (String(fields[0]), qos, fields[2] == "1", String(fields[3]))
        }
    }

    func last(on topic: String) -> (topic: String, qos: Int, retain: Bool, payload: String)? {
        lines.last { $0.topic == topic }
    }

    func stop() { process.kill(SIGKILL) }
}

/// Parses a discovery payload (Foundation is fine in tests).
func jsonObject(_ bytes: [UInt8]) -> [String: Any]? {
    try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
}

func removeDirectory(_ path: String) {
    _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", path])
}
