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
/// a 65-KB topic is shortened wherever it is repeated; an interval below the floor (`min_interval`) is refused, and
/// a flood of polls polls once per floor (issue #35).
@Suite("bad commands end to end", .serialized)
struct CommandFloodEndToEndTests {
    static func messages(_ subscriber: MQTTBridgeEndToEndTests.Subscriber, _ topic: String) -> [String] {
        subscriber.messages(topic).map { String(decoding: $0.payload, as: UTF8.self) }
    }

    /// One poll of `device` as the broker saw it: its trigger, and when it began and ended (seconds since 1970, from
    /// the record's `ts`, the end, and its window's `used_ms`).
    struct Poll {
        var trigger: String
        var start: Double
        var end: Double
    }

    static func polls(_ subscriber: MQTTBridgeEndToEndTests.Subscriber, _ device: String) -> [Poll] {
        let format = ISO8601DateFormatter()
        format.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return subscriber.messages("keepalive/gw/\(device)/state").compactMap { message in
            guard let record = try? JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any],
                let trigger = record["trigger"] as? String, let ts = record["ts"] as? String,
                let end = format.date(from: ts)?.timeIntervalSince1970
            else { return nil }
            let used = ((record["window"] as? [String: Any])?["used_ms"] as? Int).map { Double($0) / 1_000 } ?? 0
            return Poll(trigger: trigger, start: end - used, end: end)
        }
    }

    /// `interval/set 1ms` once gave a sensor ≈ 700 windows a second. Now it is answered on the device's error topic
    /// naming the floor (`min_interval`, 5 s by default) and never carried out; the floor itself is accepted.
    @Test func anIntervalBelowTheFloorIsRefusedNamingIt() async throws {
        try await MQTTBridgeEndToEndTests.withSetup { bus, broker, spool in
            try await MQTTBridgeEndToEndTests.withDaemon(
                bus: bus, port: broker.port, spool: spool, interval: "30s", minInterval: nil
            ) { process, subscriber in
                try await waitUntil("online, with a record of sensor-1", timeout: .seconds(20)) {
                    subscriber.last("keepalive/gw/status") == "online"
                        && !subscriber.messages("keepalive/gw/sensor-1/state").isEmpty
                        && subscriber.last("keepalive/gw/sensor-1/interval") == "30s"
                }
                let mark = process.mark()
                for interval in ["1ms", "5s"] {
                    try await subscriber.client.publish(
                        topic: "keepalive/gw/sensor-1/interval/set", payload: Array(interval.utf8))
                }
                // Commands are handled in order: once the floor itself is echoed, the 1 ms was answered before it.
                try await waitUntil("the floor itself accepted", timeout: .seconds(10)) {
                    subscriber.last("keepalive/gw/sensor-1/interval") == "5s"
                }
                try await waitUntil("the refusal answered", timeout: .seconds(10)) {
                    subscriber.last("keepalive/gw/sensor-1/error") != nil
                }
                #expect(
                    subscriber.last("keepalive/gw/sensor-1/error")
                        == "keepalive/gw/sensor-1/interval/set: 1ms is shorter than min_interval 5s, the shortest "
                        + "interval allowed for this device")
                #expect(!Self.messages(subscriber, "keepalive/gw/sensor-1/interval").contains("1ms"))
                // The log: the refusal (folded like every rejected command), then only the 5 s carried out.
                try await waitUntil("the accepted interval logged", timeout: .seconds(10)) {
                    process.standardError(since: mark).contains("interval changed on command")
                }
                let log = process.standardError(since: mark).split(separator: "\n")
                let rejected = log.filter { $0.contains("command rejected") }
                #expect(rejected.count == 1 && rejected.allSatisfy { $0.contains("belowFloor") }, "\(rejected)")
                let changed = log.filter { $0.contains("interval changed on command") }
                #expect(changed.count == 1 && changed.allSatisfy { $0.contains("interval=5s") }, "\(changed)")
                process.signal(SIGTERM)
                #expect(try await process.waitForExit(within: .seconds(15)) == 0)
                await subscriber.close()
            }
        }
    }

    /// 200 polls at once once gave 94 polls in a row and a sensor connected almost without pause. Now 1,000 in one
    /// second give one poll (one pending at most, the others answered) and no other poll on command until
    /// `min_interval` (5 s by default) after it ended: at most 2 polls in the next 5 s, the grid's included.
    @Test func aThousandPollsInOneSecondGiveAtMostTwoPollsInTheNextMinInterval() async throws {
        try await MQTTBridgeEndToEndTests.withSetup { bus, broker, spool in
            try await MQTTBridgeEndToEndTests.withDaemon(
                bus: bus, port: broker.port, spool: spool, interval: "30s", minInterval: nil
            ) { process, subscriber in
                try await waitUntil("online, with a record of sensor-1", timeout: .seconds(20)) {
                    subscriber.last("keepalive/gw/status") == "online" && !Self.polls(subscriber, "sensor-1").isEmpty
                }
                let mark = process.mark()
                let poll = MQTTOutgoingMessage(
                    topic: "keepalive/gw/sensor-1/poll", payload: [], qos: .atLeastOnce, retain: false)
                let floodStart = Date().timeIntervalSince1970
                let started = ContinuousClock.now
                for outcome in await subscriber.client.publish(batch: Array(repeating: poll, count: 1_000)) {
                    try outcome.get()
                }
                let publishing = ContinuousClock.now - started
                // Well inside the 5-s floor, also under a sanitizer (1.17 s once under AddressSanitizer).
                #expect(publishing < .seconds(sanitizerSlowdown), "1,000 polls published in \(publishing)")
                try await waitUntil("a poll on command", timeout: .seconds(20)) {
                    Self.polls(subscriber, "sensor-1").contains { $0.trigger == "command" }
                }
                // One more poll every half second until one is carried out: the next after the floor.
                let lastSent = Locked(ContinuousClock.now)
                try await waitUntil("a second poll on command, once the floor has passed", timeout: .seconds(30)) {
                    if lastSent.withLock({ ContinuousClock.now - $0 >= .milliseconds(500) }) {
                        lastSent.withLock { $0 = ContinuousClock.now }
                        try await subscriber.client.publish(poll)
                    }
                    return Self.polls(subscriber, "sensor-1").filter { $0.trigger == "command" }.count >= 2
                }
                let polls = Self.polls(subscriber, "sensor-1")
                let commanded = polls.filter { $0.trigger == "command" }
                // Records arrive in `seq` order: every poll that began before the second one on command is here.
                let inWindow = polls.filter { $0.start >= floodStart - 0.01 && $0.start < floodStart + 5 }
                #expect(inWindow.count <= 2, "\(inWindow.count) polls in the 5 s after the flood: \(inWindow)")
                #expect(inWindow.filter { $0.trigger == "command" }.count == 1, "\(inWindow)")
                #expect(commanded.count == 2, "\(commanded)")
                // Milliseconds of `ts` are truncated: a few of slack.
                let pause = commanded.count == 2 ? commanded[1].start - commanded[0].end : 0
                #expect(pause >= 5 - 0.01, "the second poll on command began \(pause) s after the first ended")
                // Answered on the error topic, limited (5 at once, then one each 12 s), saying why.
                let answers = Self.messages(subscriber, "keepalive/gw/sensor-1/error")
                let elapsed = Int((ContinuousClock.now - started) / .seconds(1))
                #expect(!answers.isEmpty && answers.count <= 5 + elapsed / 12 + 1, "\(answers.count) in \(elapsed) s")
                #expect(answers.contains("keepalive/gw/sensor-1/poll: a poll is already pending"), "\(answers)")
                #expect(answers.allSatisfy { $0.contains("already pending") || $0.contains("polled on command") })
                // The log: one line per poll carried out, and the refusals folded (one line per kind).
                try await waitUntil("the second poll logged", timeout: .seconds(10)) {
                    process.standardError(since: mark).components(separatedBy: "poll on command").count - 1 >= 2
                }
                let log = process.standardError(since: mark)
                let lines = log.split(separator: "\n")
                #expect(lines.filter { $0.contains("poll on command") }.count == 2)
                let rejected = lines.filter { $0.contains("command rejected") }
                #expect(rejected.count <= 2, "\(rejected)")
                #expect(log.utf8.count < 5_000, "the log grew by \(log.utf8.count) bytes")
                print(
                    "1,000 polls in \(publishing): \(inWindow.count) polls in the next 5 s, the next on command "
                        + "\(pause) s after the first ended, \(answers.count) answers, the log grew by "
                        + "\(log.utf8.count) bytes in \(lines.count) lines")
                process.signal(SIGTERM)
                #expect(try await process.waitForExit(within: .seconds(15)) == 0)
                #expect(process.standardError.contains("command rejected …repeated"))
                await subscriber.close()
            }
        }
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
