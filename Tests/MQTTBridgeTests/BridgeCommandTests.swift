import LocalServices
import TestHarness
import MQTT
@testable import MQTTBridge
import Testing

@Suite struct BridgeCommandTests {
    @Test func commandsBecomeTypedAndMalformedOnesAreAnsweredOnTheErrorTopic() async throws {
        let broker = try await MosquittoBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer {
            broker.remove()
            removeDirectory(directory)
        }
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(port: broker.port, directory: directory), devices: [kitchen, cellar],
            logger: testLogger())
        let running = RunningBridge(bridge)
        try await running.waitUntilConnected()
        let subscriber = try await MosquittoSubscriber(broker: broker, filters: ["keepalive/#"])
        defer { subscriber.stop() }
        // The bridge subscribed before it counted as connected? Wait for its SUBSCRIBE of the commands.
        try await waitUntil("the bridge subscribed to the commands") {
            broker.log.contains("keepalive/gw/+/interval/set (QoS 1)")
        }
        let commander = try await Collector(port: broker.port, filters: [])

        // The daemon's side: carry out commands as they come, answering interval changes.
        let received = Task { () -> [BridgeCommand] in
            var commands: [BridgeCommand] = []
            for await command in bridge.commands {
                commands.append(command)
                if case .setInterval(let device, let interval) = command {
                    bridge.intervalChanged(device: device, to: interval)
                }
                if commands.count == 2 { break }
            }
            return commands
        }
        try await commander.client.publish(topic: "keepalive/gw/kitchen/poll", payload: Array("PRESS".utf8))
        try await commander.client.publish(topic: "keepalive/gw/cellar/interval/set", payload: Array("45s".utf8))
        let commands = try await withTimeout("two commands arrive") { await received.value }
        #expect(commands == [.pollNow(device: "kitchen"), .setInterval(device: "cellar", .seconds(45))])
        let echo = try await subscriber.wait(for: "keepalive/gw/cellar/interval") { $0 == "45s" }
        #expect(echo.retain && echo.qos == 1)

        // Malformed: a bad duration, a payload too long, a device nobody configured. Answered, no crash.
        try await commander.client.publish(topic: "keepalive/gw/kitchen/interval/set", payload: Array("soon".utf8))
        let bad = try await subscriber.wait(for: "keepalive/gw/kitchen/error")
        #expect(
            bad.payload.contains("keepalive/gw/kitchen/interval/set")
                && bad.payload.contains("`soon` is not a duration"))
        #expect(!bad.retain)
        try await commander.client.publish(
            topic: "keepalive/gw/kitchen/poll", payload: [UInt8](repeating: UInt8(ascii: "x"), count: 1_000))
        try await subscriber.wait(for: "keepalive/gw/kitchen/error") { $0.contains("1000 bytes") }
        try await commander.client.publish(topic: "keepalive/gw/garage/poll", payload: Array("PRESS".utf8))
        let unknown = try await subscriber.wait(for: "keepalive/gw/error")
        #expect(unknown.payload.contains("keepalive/gw/garage/poll") && unknown.payload.contains("garage"))
        #expect(bridge.statistics.connected)

        await commander.close()
        await running.stop()
    }

    /// An interval below the device's floor (`min_interval`) is answered on its error topic, naming the floor, and
    /// never reaches the daemon; the floor itself is accepted. Each device has its own.
    @Test func anIntervalBelowTheFloorIsRefusedNamingIt() throws {
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer { removeDirectory(directory) }
        var fast = cellar
        fast.minimumInterval = .milliseconds(500)
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(port: 1, directory: directory), devices: [kitchen, fast],
            logger: testLogger())
        func parse(_ device: String, _ text: String) -> Result<BridgeCommand?, MQTTBridge.CommandRejection> {
            bridge.parseCommand(
                MQTTMessage(
                    topic: "keepalive/gw/\(device)/interval/set", payload: Array(text.utf8), qos: .atLeastOnce,
                    retain: false))
        }
        guard case .failure(let refused) = parse("kitchen", "1ms") else {
            Issue.record("1ms was accepted")
            return
        }
        #expect(refused.kind == "belowFloor" && refused.device == "kitchen")
        #expect(refused.topic == "keepalive/gw/kitchen/error")
        #expect(
            refused.message
                == "keepalive/gw/kitchen/interval/set: 1ms is shorter than min_interval 5s, the shortest interval "
                + "allowed for this device")
        #expect((try? parse("kitchen", "4.999s").get()) == nil)
        #expect(try parse("kitchen", "5s").get() == .setInterval(device: "kitchen", .seconds(5)))
        #expect(try parse("cellar", "500ms").get() == .setInterval(device: "cellar", .milliseconds(500)))
        #expect((try? parse("cellar", "499ms").get()) == nil)
        // A poll is no interval: the floor of polls on command is the daemon's (CommandPollLimiter).
        #expect(
            try bridge.parseCommand(
                MQTTMessage(topic: "keepalive/gw/kitchen/poll", payload: [], qos: .atLeastOnce, retain: false)
            ).get()
                == .pollNow(device: "kitchen"))
    }

    @Test func retainedCommandsAreRefusedAtEveryStartAndNeverCarriedOut() async throws {
        let broker = try await MosquittoBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer {
            broker.remove()
            removeDirectory(directory)
        }
        // Retained before the bridge exists: an interval from one would outlive every edit of the file.
        let commander = try await Collector(port: broker.port, filters: [])
        try await commander.client.publish(
            topic: "keepalive/gw/cellar/interval/set", payload: Array("45s".utf8), retain: true)
        try await commander.client.publish(
            topic: "keepalive/gw/kitchen/poll", payload: Array("PRESS".utf8), retain: true)
        let subscriber = try await MosquittoSubscriber(broker: broker, filters: ["keepalive/gw/+/error"])
        defer { subscriber.stop() }

        for start in 1...2 {
            let bridge = try MQTTBridge(
                configuration: bridgeConfiguration(port: broker.port, directory: directory),
                devices: [kitchen, cellar], logger: testLogger())
            let commands = Task { () -> [BridgeCommand] in
                var commands: [BridgeCommand] = []
                for await command in bridge.commands {
                    commands.append(command)
                    break
                }
                return commands
            }
            let running = RunningBridge(bridge)
            let refusals = { @Sendable (device: String) in
                subscriber.lines.filter {
                    $0.topic == "keepalive/gw/\(device)/error" && $0.payload.contains("a retained command is refused")
                }.count
            }
            try await waitUntil("start \(start): both retained commands refused") {
                refusals("cellar") >= start && refusals("kitchen") >= start
            }
            // A live command still works, and is the first one carried out: the retained ones never were.
            try await commander.client.publish(topic: "keepalive/gw/cellar/interval/set", payload: Array("30s".utf8))
            let carriedOut = try await withTimeout("the live command arrives") { await commands.value }
            #expect(carriedOut == [.setInterval(device: "cellar", .seconds(30))])
            await running.stop()
        }
        // Cleared the MQTT way, with empty retained messages: nothing to refuse, no command, no answer.
        let before = subscriber.lines.count
        try await commander.client.publish(topic: "keepalive/gw/cellar/interval/set", payload: [], retain: true)
        try await commander.client.publish(topic: "keepalive/gw/kitchen/poll", payload: [], retain: true)
        @Sendable func subscriptions() -> Int {
            broker.log.components(separatedBy: "keepalive/gw/+/interval/set (QoS 1)").count
        }
        let subscribedBefore = subscriptions()
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(port: broker.port, directory: directory), devices: [kitchen, cellar],
            logger: testLogger())
        let running = RunningBridge(bridge)
        try await running.waitUntilConnected()
        try await waitUntil("the bridge subscribed to the commands") { subscriptions() > subscribedBefore }
        // The unknown device's answer comes after anything the subscription could have caused.
        let unknown = try await Collector(port: broker.port, filters: ["keepalive/gw/error"])
        try await commander.client.publish(topic: "keepalive/gw/garage/poll", payload: Array("PRESS".utf8))
        _ = try await unknown.wait(for: "keepalive/gw/error")
        #expect(subscriber.lines.count == before, "\(subscriber.lines.dropFirst(before))")
        await unknown.close()
        await commander.close()
        await running.stop()
    }
}
