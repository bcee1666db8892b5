import BlueZSimulator
import LocalServices
import TestHarness
import Foundation
import Basics
import MQTT
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The bridge through the binary: `keepalive run` with `mqtt:` against a real mosquitto on a free loopback port
/// and the simulator; an independent subscriber checks what arrives.
@Suite("MQTT bridge end to end", .serialized)
struct MQTTBridgeEndToEndTests {
    /// Every message the subscriber saw, in order.
    final class Subscriber: Sendable {
        let client: MQTTClient
        let received = Locked<[MQTTMessage]>([])
        let reader: Task<Void, Never>

        init(port: Int, id: String = "e2e-subscriber") async throws {
            var configuration = MQTTConfiguration(host: "127.0.0.1", port: port, clientID: id)
            configuration.reconnect = MQTTReconnectPolicy(
                initialDelay: .milliseconds(100), maximumDelay: .milliseconds(200), jitter: 0)
            client = try MQTTClient(configuration: configuration)
            let received = self.received
            let messages = client.messages
            reader = Task { for await message in messages { received.withLock { $0.append(message) } } }
            _ = try await client.connect()
            _ = try await client.subscribe("#")
        }

        func messages(_ topic: String) -> [MQTTMessage] {
            received.withLock { $0.filter { $0.topic == topic } }
        }

        func last(_ topic: String) -> String? {
            messages(topic).last.map { String(decoding: $0.payload, as: UTF8.self) }
        }

        /// The `seq` of every state message of every device.
        func stateSequences(prefix: String) -> [Int] {
            received.withLock { $0 }.filter { $0.topic.hasPrefix(prefix) && $0.topic.hasSuffix("/state") }.compactMap {
                message in
                (try? JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any])?["seq"] as? Int
            }
        }

        func close() async {
            await client.close()
            reader.cancel()
        }
    }

    /// Two simulated sensors behind the bridge (gateway `gw`); `minInterval` nil leaves the default floor (5s),
    /// which the tests' intervals of a second or two are below.
    static func configuration(
        port: Int, spool: String, interval: String = "2s", minInterval: String? = "1s", extra: String = ""
    ) -> String {
        """
        interval: \(interval)
        \(minInterval.map { "min_interval: \($0)" } ?? "")
        devices:
          - {name: sensor-1, address: C0:FF:EE:00:00:01, read: [2a19, 2a6e]}
          - {name: sensor-2, address: C0:FF:EE:00:00:02, read: [2a19]}
        mqtt:
          broker: mqtt://127.0.0.1:\(port)
          gateway: gw
          spool: {path: \(spool)}
        \(extra)
        """
    }

    /// `keepalive run` on `configuration(port:spool:interval:)` (its records on standard output, or `--output`
    /// as `arguments` say) beside a subscriber to everything on the broker; the daemon is terminated and the file
    /// removed after `body` (which closes the subscriber when it needs the last messages).
    static func withDaemon(
        bus: PrivateBus, port: Int, spool: String, interval: String = "1s", minInterval: String? = "1s",
        arguments: [String] = [], _ body: @Sendable (CommandProcess, Subscriber) async throws -> Void
    ) async throws {
        let file = try TemporaryFile(
            name: "keepalive.yaml",
            contents: configuration(port: port, spool: spool, interval: interval, minInterval: minInterval))
        defer { file.remove() }
        let subscriber = try await Subscriber(port: port)
        let process = try CommandProcess(["run", "--config", file.path, "--bus", bus.address] + arguments)
        defer { process.terminate() }
        try await body(process, subscriber)
    }

    static func withSetup<T: Sendable>(
        persistentBroker: Bool = false, _ body: @Sendable (PrivateBus, MosquittoBroker, String) async throws -> T
    ) async throws -> T {
        try await CLITests.withSimulator(devices: 2) { bus, _ in
            let broker = try await MosquittoBroker.start(persistent: persistentBroker)
            let spool = try makeTemporaryDirectory(prefix: "keepalive-spool")
            defer {
                broker.remove()
                _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", spool])
            }
            return try await body(bus, broker, spool)
        }
    }

    /// The files a process has mapped (`/proc/PID/maps`), by name. Read to the end with read(2): a proc file
    /// has size 0, and readers that trust the size stop after the first page.
    static func mappedFiles(_ pid: pid_t) throws -> Set<String> {
        let descriptor = open("/proc/\(pid)/maps", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let maps = Subprocess.readAll(descriptor)
        return Set(
            maps.split(separator: "\n").compactMap { line in
                line.split(separator: " ", omittingEmptySubsequences: true).dropFirst(5).first.map {
                    String($0.split(separator: "/").last ?? "")
                }
            })
    }

    /// libmosquitto is loaded with dlopen when the bridge starts (Sources/MQTT/LibMosquitto.swift): a daemon
    /// without `mqtt:` maps neither it nor OpenSSL; one with `mqtt:` maps it once it is running.
    @Test func libmosquittoAndOpenSSLAreMappedOnlyWithAnMQTTSection() async throws {
        @Sendable func mqttLibraries(_ pid: pid_t) throws -> [String] {
            try Self.mappedFiles(pid).filter {
                $0.hasPrefix("libmosquitto.so") || $0.hasPrefix("libssl.so") || $0.hasPrefix("libcrypto.so")
            }.sorted()
        }
        try await Self.withSetup { bus, broker, spool in
            let plain = try TemporaryFile(
                name: "plain.yaml", contents: CLITests.configuration(devices: 2, interval: "2s"))
            defer { plain.remove() }
            let without = try CommandProcess(["run", "--config", plain.path, "--bus", bus.address])
            defer { without.terminate() }
            try await waitUntil("a record of each device", timeout: .seconds(20)) {
                CLITests.records(without.standardOutput).count >= 2 || without.exitStatus != nil
            }
            #expect(without.exitStatus == nil, "stderr: \(without.standardError)")
            #expect(try mqttLibraries(without.pid) == [], "a daemon without mqtt: mapped them")
            without.signal(SIGTERM)
            #expect(try await without.waitForExit(within: .seconds(10)) == 0, "stderr: \(without.standardError)")

            let subscriber = try await Subscriber(port: broker.port)
            defer { Task { await subscriber.close() } }
            let file = try TemporaryFile(
                name: "keepalive.yaml", contents: Self.configuration(port: broker.port, spool: spool))
            defer { file.remove() }
            let with = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { with.terminate() }
            try await waitUntil("online", timeout: .seconds(20)) { subscriber.last("keepalive/gw/status") == "online" }
            let mapped = try mqttLibraries(with.pid)
            #expect(mapped.contains { $0.hasPrefix("libmosquitto.so") }, "\(mapped)")
            #expect(mapped.contains { $0.hasPrefix("libcrypto.so") }, "\(mapped)")
        }
    }

    @Test func theDaemonPublishesItsTopicsAndDiscoveryAndAnswersCommands() async throws {
        try await Self.withSetup { bus, broker, spool in
            let subscriber = try await Subscriber(port: broker.port)
            defer { Task { await subscriber.close() } }
            let file = try TemporaryFile(
                name: "keepalive.yaml", contents: Self.configuration(port: broker.port, spool: spool))
            defer { file.remove() }
            let daemon = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { daemon.terminate() }

            try await waitUntil("online and a state of each device", timeout: .seconds(20)) {
                subscriber.last("keepalive/gw/status") == "online"
                    && !subscriber.messages("keepalive/gw/sensor-1/state").isEmpty
                    && !subscriber.messages("keepalive/gw/sensor-2/state").isEmpty
            }
            #expect(subscriber.messages("keepalive/gw/status").last?.qos == .atLeastOnce)
            // The daemon's health (its STATUS= line), retained.
            try await waitUntil("the health line", timeout: .seconds(10)) {
                subscriber.last("keepalive/gw/health") == "polling 2 devices every 2s"
            }
            // The first complete poll (under ThreadSanitizer a window once expired after the battery read).
            @Sendable func newData() -> MQTTMessage? {
                subscriber.messages("keepalive/gw/sensor-1/state").first {
                    String(decoding: $0.payload, as: UTF8.self).contains("\"result\":\"newData\"")
                }
            }
            try await waitUntil("a complete poll of sensor-1", timeout: .seconds(20)) { newData() != nil }
            let state = try #require(newData())
            let record = try #require(try JSONSerialization.jsonObject(with: Data(state.payload)) as? [String: Any])
            #expect(record["device"] as? String == "sensor-1" && record["trigger"] as? String == "schedule")
            let readings = try #require(record["readings"] as? [String: [String: Any]])
            #expect(readings["battery"]?["unit"] as? String == "%")
            #expect(readings["temperature"]?["unit"] as? String == "°C")
            #expect(state.retain == false && state.qos == .atLeastOnce)

            try await waitUntil("availability online", timeout: .seconds(10)) {
                subscriber.last("keepalive/gw/sensor-1/availability") == "online"
            }
            // Home Assistant discovery: a sensor per reading, naming its device, unit and class, with availability.
            @Sendable func batteryConfig() -> MQTTMessage? {
                subscriber.received.withLock { $0 }.first {
                    $0.topic.hasPrefix("homeassistant/sensor/gw/") && $0.topic.hasSuffix("battery/config")
                        && !$0.payload.isEmpty
                }
            }
            try await waitUntil("the battery sensor announced", timeout: .seconds(10)) { batteryConfig() != nil }
            let discovery = try #require(batteryConfig())
            let config = try #require(try JSONSerialization.jsonObject(with: Data(discovery.payload)) as? [String: Any])
            #expect(config["device_class"] as? String == "battery", "\(config)")
            #expect(config["unit_of_measurement"] as? String == "%")
            #expect(config["state_class"] as? String == "measurement")
            #expect(config["expire_after"] as? Int == 6, "3 × the 2-s interval")
            #expect((config["unique_id"] as? String)?.isEmpty == false)
            #expect(config["availability_mode"] as? String == "all")

            // Commands: a poll now, answered by a record whose trigger is `command`; a new interval, echoed.
            try await subscriber.client.publish(topic: "keepalive/gw/sensor-1/poll", payload: [])
            try await waitUntil("a record on command", timeout: .seconds(10)) {
                subscriber.messages("keepalive/gw/sensor-1/state").contains {
                    String(decoding: $0.payload, as: UTF8.self).contains("\"trigger\":\"command\"")
                }
            }
            try await subscriber.client.publish(topic: "keepalive/gw/sensor-1/interval/set", payload: Array("3s".utf8))
            try await waitUntil("the interval echoed", timeout: .seconds(10)) {
                subscriber.last("keepalive/gw/sensor-1/interval") == "3s"
            }
            try await subscriber.client.publish(
                topic: "keepalive/gw/sensor-1/interval/set", payload: Array("banana".utf8))
            try await waitUntil("the bad command answered", timeout: .seconds(10)) {
                subscriber.last("keepalive/gw/sensor-1/error") != nil
            }
            #expect(subscriber.last("keepalive/gw/sensor-1/error")?.contains("banana") == true)

            // A clean shutdown: every record written is delivered, `seq` without a gap, then `offline`.
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(within: .seconds(15)) == 0, "\(daemon.standardError.suffix(2_000))")
            try await waitUntil("offline", timeout: .seconds(10)) {
                subscriber.last("keepalive/gw/status") == "offline"
            }
            let written = CLITests.records(daemon.standardOutput).map(\.seq)
            let delivered = Set(subscriber.stateSequences(prefix: "keepalive/gw/"))
            #expect(
                !written.isEmpty && Set(written).isSubset(of: delivered),
                "written \(written), delivered \(delivered.sorted())")
            #expect(written == Array(0..<written.count))
        }
    }

    /// The broker SIGKILLed mid-run and back 30 s later: the daemon's reconnection has backed off (1 s doubling,
    /// jittered) by then, and the 60-odd records written meanwhile wait in the spool. Once it is back every record
    /// arrives, replayed in `seq` order; duplicates (QoS 1 redelivery) only of what was in flight at the kill.
    ///
    /// The broker keeps its sessions on disk (saved on SIGUSR1 before the kill), as a gateway's broker would: the
    /// subscriber's session and subscription are there when it comes back. Without them, a daemon reconnecting in
    /// the instant between the broker's return and the subscriber's new SUBSCRIBE delivered records to nobody
    /// (a CI run waited 120 s for them), which is the subscriber's loss, not the bridge's.
    @Test func aBrokerKilledMidRunAndBack30SecondsLaterGetsEveryRecordInOrder() async throws {
        try await Self.withSetup(persistentBroker: true) { bus, broker, spool in
            let file = try TemporaryFile(
                name: "keepalive.yaml", contents: Self.configuration(port: broker.port, spool: spool, interval: "1s"))
            defer { file.remove() }
            // One subscriber throughout: it reconnects within 200 ms of the broker's return, long before the daemon.
            let subscriber = try await Subscriber(port: broker.port)
            let daemon = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { daemon.terminate() }
            try await waitUntil("first states", timeout: .seconds(20)) {
                !subscriber.stateSequences(prefix: "keepalive/gw/").isEmpty
            }
            // mosquitto writes its database on SIGUSR1; the subscriber's session is in it once the file exists.
            let database = broker.directory + "/mosquitto.db"
            broker.signal(SIGUSR1)
            try await waitUntil("the broker's sessions saved", timeout: .seconds(10)) { access(database, F_OK) == 0 }
            broker.kill()
            let killedAt = ContinuousClock.now
            let deliveredBefore = subscriber.stateSequences(prefix: "keepalive/gw/").count
            try await waitUntil("30 s of outage", timeout: .seconds(40)) {
                ContinuousClock.now - killedAt >= .seconds(30)
            }
            let writtenDuringOutage = CLITests.records(daemon.standardOutput).count
            let restarted = try await broker.restart()
            let backAt = ContinuousClock.now
            do {
                try await waitUntil("every record written is delivered", timeout: .seconds(120)) {
                    let written = Set(CLITests.records(daemon.standardOutput).map(\.seq))
                    return written.isSubset(of: Set(subscriber.stateSequences(prefix: "keepalive/gw/")))
                }
            } catch {
                let missing = Set(CLITests.records(daemon.standardOutput).map(\.seq))
                    .subtracting(subscriber.stateSequences(prefix: "keepalive/gw/")).sorted()
                Issue.record("\(error): missing \(missing); the daemon's log: \(daemon.standardError.suffix(3_000))")
                throw error
            }
            let caughtUp = ContinuousClock.now - backAt
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(within: .seconds(15)) == 0)
            let written = CLITests.records(daemon.standardOutput).map(\.seq)
            // The broker acknowledged the records drained at shutdown; it forwards them to the subscriber after. A
            // loaded run read the subscriber before the last two arrived.
            do {
                try await waitUntil("the records drained at shutdown arrive", timeout: .seconds(20)) {
                    Set(written).isSubset(of: Set(subscriber.stateSequences(prefix: "keepalive/gw/")))
                }
            } catch {
                let missing = Set(written).subtracting(subscriber.stateSequences(prefix: "keepalive/gw/")).sorted()
                Issue.record("\(error): missing \(missing); the daemon's log: \(daemon.standardError.suffix(3_000))")
                throw error
            }
            let arrived = subscriber.stateSequences(prefix: "keepalive/gw/")
            #expect(Set(written).isSubset(of: Set(arrived)), "every record delivered")
            #expect(Set(arrived).sorted() == Array(0..<Set(arrived).count), "seq contiguous at the subscriber")
            // After the return: in seq order, once each, except a redelivery of what was in flight at the kill.
            let replayed = Array(arrived.dropFirst(deliveredBefore))
            var seen = Set(arrived.prefix(deliveredBefore))
            var duplicates = 0
            var last = -1
            for seq in replayed {
                if !seen.insert(seq).inserted {
                    duplicates += 1
                    continue
                }
                #expect(seq > last, "replayed in seq order: \(seq) after \(last)")
                last = seq
            }
            #expect(duplicates <= 100, "duplicates only of what was in flight (at most libmosquitto's 100)")
            print(
                """
                bridge e2e: 30 s outage, \(writtenDuringOutage - deliveredBefore) records spooled meanwhile; all \
                \(written.count) delivered 
                """
                    + "\(caughtUp) after the broker's return, \(duplicates) duplicates")
            await subscriber.close()
            restarted.kill()
        }
    }

    @Test func aDaemonKilledWhileSpoolingReplaysTheSpoolAfterItsRestart() async throws {
        try await CLITests.withSimulator(devices: 2) { bus, _ in
            let port = try freeLoopbackPort()  // nothing listens yet: the broker is absent at start
            let spool = try makeTemporaryDirectory(prefix: "keepalive-spool")
            defer { _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", spool]) }
            let file = try TemporaryFile(
                name: "keepalive.yaml", contents: Self.configuration(port: port, spool: spool, interval: "1s"))
            defer { file.remove() }
            let first = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            try await waitUntil("records spooled with no broker", timeout: .seconds(20)) {
                CLITests.records(first.standardOutput).count >= 4
            }
            first.signal(SIGKILL)
            _ = try await first.waitForExit(within: .seconds(10))
            let spooled = CLITests.records(first.standardOutput).map(\.line)

            let broker = try await MosquittoBroker.start(port: port)
            defer { broker.remove() }
            let subscriber = try await Subscriber(port: port)
            let second = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { second.terminate() }
            try await waitUntil("the first run's records delivered", timeout: .seconds(30)) {
                let payloads = Set(
                    subscriber.received.withLock { $0 }.filter { $0.topic.hasSuffix("/state") }.map {
                        String(decoding: $0.payload, as: UTF8.self)
                    })
                return spooled.allSatisfy { payloads.contains($0) }
            }
            second.signal(SIGTERM)
            _ = try await second.waitForExit(within: .seconds(15))
            await subscriber.close()
        }
    }

    /// A wrong password: the daemon says which broker refused which user (never the password), keeps polling and
    /// spooling, retries, and warns that a password file others can read is one.
    @Test func aWrongPasswordIsAClearErrorAndNeverACrash() async throws {
        try await CLITests.withSimulator(devices: 2) { bus, _ in
            let directory = try makeTemporaryDirectory(prefix: "keepalive-auth")
            defer { _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", directory]) }
            let made = try await Subprocess.run([
                "mosquitto_passwd", "-b", "-c", directory + "/passwords", "gateway", "right-secret",
            ])
            try #require(made.status == 0, "\(made.standardError)")
            let broker = try await MosquittoBroker.start(
                listener: "allow_anonymous false\npassword_file \(directory)/passwords")
            defer { broker.remove() }
            let passwordFile = directory + "/mqtt-password"
            try "wrong-secret\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
            chmod(passwordFile, 0o644)
            let file = try TemporaryFile(
                name: "keepalive.yaml",
                contents: Self.configuration(
                    port: broker.port, spool: directory + "/spool", interval: "1s",
                    extra: "  username: gateway\n  password_file: \(passwordFile)\n"
                )
            )
            defer { file.remove() }
            let daemon = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { daemon.terminate() }
            try await waitUntil("the refusal logged and polls going on", timeout: .seconds(20)) {
                daemon.standardError.contains("refused") && CLITests.records(daemon.standardOutput).count >= 4
            }
            let log = daemon.standardError
            #expect(log.contains("127.0.0.1:\(broker.port)"), "\(log.suffix(2_000))")
            #expect(log.contains("gateway"))
            #expect(log.contains("can be read by every user"), "a world-readable password file is warned about")
            #expect(!log.contains("wrong-secret"), "the password is never logged")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(within: .seconds(15)) == 0, "\(daemon.standardError.suffix(2_000))")
        }
    }

    /// `mqtts://` with a CA made in the test: the daemon connects and delivers; with another CA it is refused with
    /// a clear error naming the broker, and polling goes on.
    @Test func tlsWorksWithTheRightCAAndAWrongOneIsRefusedClearly() async throws {
        try await CLITests.withSimulator(devices: 2) { bus, _ in
            let directory = try makeTemporaryDirectory(prefix: "keepalive-tls")
            defer { _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", directory]) }
            try await TestCertificates.make(in: directory)
            let broker = try await MosquittoBroker.start(listener: TestCertificates.listener(directory))
            defer { broker.remove() }
            for (ca, works) in [("ca.crt", true), ("other-ca.crt", false)] {
                let yaml =
                    Self.configuration(port: broker.port, spool: directory + "/spool-\(ca)", interval: "1s")
                    .replacingOccurrences(of: "mqtt://127.0.0.1", with: "mqtts://127.0.0.1")
                    + "  tls: {ca_file: \(directory)/\(ca)}\n"
                let file = try TemporaryFile(name: "keepalive.yaml", contents: yaml)
                defer { file.remove() }
                let daemon = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
                defer { daemon.terminate() }
                if works {
                    try await waitUntil("connected over TLS and delivering", timeout: .seconds(20)) {
                        daemon.standardError.contains("connected to the MQTT broker")
                            && CLITests.records(daemon.standardOutput).count >= 2
                    }
                } else {
                    try await waitUntil("the wrong CA refused, polls going on", timeout: .seconds(20)) {
                        daemon.standardError.contains("certificate verify failed")
                            && CLITests.records(daemon.standardOutput).count >= 2
                    }
                    #expect(
                        daemon.standardError.contains("127.0.0.1:\(broker.port)"),
                        "\(daemon.standardError.suffix(2_000))")
                    #expect(!daemon.standardError.contains("connected to the MQTT broker"))
                }
                daemon.signal(SIGTERM)
                #expect(try await daemon.waitForExit(within: .seconds(15)) == 0)
            }
        }
    }
}
