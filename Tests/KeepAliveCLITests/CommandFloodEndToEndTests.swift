import Foundation
import LocalServices
import Basics
import MQTT
import TestHarness
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Commands that must not hurt, through the binary and a real mosquitto: a retained `interval/set` is refused at
/// every start; a flood of bad commands is one log line and a summary, with the error topic answered a few times;
/// a 65-KB topic is shortened wherever it is repeated.
@Suite("bad commands end to end", .serialized)
struct CommandFloodEndToEndTests {
    static func messages(_ subscriber: MQTTBridgeEndToEndTests.Subscriber, _ topic: String) -> [String] {
        subscriber.messages(topic).map { String(decoding: $0.payload, as: UTF8.self) }
    }

    @Test func aRetainedIntervalIsRefusedAtEveryStartAndNeverApplied() async throws {
        try await MQTTBridgeEndToEndTests.withSetup { bus, broker, spool in
            let file = try TemporaryFile(
                name: "keepalive.yaml",
                contents: MQTTBridgeEndToEndTests.configuration(port: broker.port, spool: spool, interval: "1s"))
            defer { file.remove() }
            let subscriber = try await MQTTBridgeEndToEndTests.Subscriber(port: broker.port)
            try await subscriber.client.publish(
                topic: "keepalive/gw/sensor-1/interval/set", payload: Array("1000000h".utf8), retain: true)
            for start in 1...2 {
                let process = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
                defer { process.terminate() }
                try await waitUntil("start \(start): the retained command refused", timeout: .seconds(20)) {
                    Self.messages(subscriber, "keepalive/gw/sensor-1/error").filter {
                        $0.contains("a retained command is refused")
                    }.count >= start
                }
                // The device goes on at its configured interval: three more records of it.
                let before = CLITests.records(process.standardOutput).filter { $0.device == "sensor-1" }.count
                try await waitUntil("start \(start): sensor-1 still polled", timeout: .seconds(20)) {
                    CLITests.records(process.standardOutput).filter { $0.device == "sensor-1" }.count >= before + 3
                }
                try await waitUntil("start \(start): the refusal logged", timeout: .seconds(10)) {
                    process.standardError.contains("a retained command is refused")
                }
                #expect(!process.standardError.contains("interval changed on command"))
                process.signal(SIGTERM)
                #expect(try await process.waitForExit(within: .seconds(15)) == 0)
            }
            #expect(subscriber.last("keepalive/gw/sensor-1/interval") != "1000000h")
            await subscriber.close()
        }
    }

    @Test func aFloodOfBadCommandsIsOneLogLineASummaryAndAFewAnswers() async throws {
        try await MQTTBridgeEndToEndTests.withSetup { bus, broker, spool in
            try await MQTTBridgeEndToEndTests.withDaemon(bus: bus, port: broker.port, spool: spool) {
                process, subscriber in
                try await waitUntil("records delivered", timeout: .seconds(20)) {
                    !subscriber.stateSequences(prefix: "keepalive/gw/").isEmpty
                }

                // 4,000 bad intervals to one device, and 300 polls to a device level of 65,000 bytes.
                let started = ContinuousClock.now
                let bad = MQTTOutgoingMessage(
                    topic: "keepalive/gw/sensor-1/interval/set", payload: Array("banana".utf8), qos: .atLeastOnce,
                    retain: false)
                let long = "keepalive/gw/" + String(repeating: "x", count: 65_000) + "/poll"
                let poll = MQTTOutgoingMessage(topic: long, payload: [], qos: .atLeastOnce, retain: false)
                let logBefore = process.standardError.utf8.count
                for outcome in await subscriber.client.publish(batch: Array(repeating: bad, count: 4_000)) {
                    try outcome.get()
                }
                for outcome in await subscriber.client.publish(batch: Array(repeating: poll, count: 300)) {
                    try outcome.get()
                }
                // The daemon went on; the last of the flood reached it once a record after it is on the broker.
                let last = subscriber.stateSequences(prefix: "keepalive/gw/").max() ?? 0
                try await waitUntil("records go on", timeout: .seconds(20)) {
                    (subscriber.stateSequences(prefix: "keepalive/gw/").max() ?? 0) >= last + 4
                }
                let answers = Self.messages(subscriber, "keepalive/gw/sensor-1/error")
                let gatewayAnswers = Self.messages(subscriber, "keepalive/gw/error")
                let elapsed = Int((ContinuousClock.now - started) / .seconds(1))
                // Five at once per device, then one each 12 s; the gateway's own topic the same.
                #expect(answers.count >= 1 && answers.count <= 5 + elapsed / 12 + 1, "\(answers.count) in \(elapsed) s")
                #expect(gatewayAnswers.count >= 1 && gatewayAnswers.count <= 5 + elapsed / 12 + 1)
                // A long topic is shortened in the answer: its length said, not its 65,000 bytes.
                #expect(gatewayAnswers.allSatisfy { $0.utf8.count < 500 }, "\(gatewayAnswers.first ?? "")")
                #expect(gatewayAnswers.first?.contains("(65018 bytes)") == true, "\(gatewayAnswers.first ?? "")")
                // One line per kind of rejection in the log (folded), each well under a kilobyte.
                let log = String(process.standardError.utf8.dropFirst(logBefore)) ?? ""
                let rejected = log.split(separator: "\n").filter { $0.contains("command rejected") }
                #expect(rejected.count == 2, "\(rejected)")
                #expect(rejected.allSatisfy { $0.utf8.count < 1_000 })
                #expect(log.utf8.count < 20_000, "the log grew by \(log.utf8.count) bytes")
                print(
                    "a flood of 4,300 bad commands: the log grew by \(log.utf8.count) bytes, "
                        + "\(answers.count + gatewayAnswers.count) answers in \(elapsed) s")

                // An answer after the bucket refilled says how many went unanswered.
                let lastSent = Locked(ContinuousClock.now)
                try await waitUntil("an answer noting the withheld ones", timeout: .seconds(40)) {
                    // One more bad command every half second, until one is answered.
                    if lastSent.withLock({ ContinuousClock.now - $0 >= .milliseconds(500) }) {
                        lastSent.withLock { $0 = ContinuousClock.now }
                        try await subscriber.client.publish(topic: bad.topic, payload: bad.payload)
                    }
                    return Self.messages(subscriber, "keepalive/gw/sensor-1/error").contains {
                        $0.contains("more rejected since the last answer here")
                    }
                }

                // At shutdown the repeats are summarised.
                process.signal(SIGTERM)
                #expect(try await process.waitForExit(within: .seconds(15)) == 0)
                #expect(
                    process.standardError.contains("command rejected …repeated"),
                    "\(process.standardError.suffix(2_000))")
                await subscriber.close()
            }
        }
    }
}
