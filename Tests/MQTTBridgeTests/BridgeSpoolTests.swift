import LocalServices
import TestHarness
import Foundation
import MQTT
@testable import MQTTBridge
import Readings
import ServiceLifecycle
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct BridgeSpoolTests {
    @Test func recordsSubmittedWhileTheBrokerIsAbsentAreAllDeliveredInOrderWhenItComes() async throws {
        let port = try freeLoopbackPort()
        let brokerDirectory = try makeTemporaryDirectory(prefix: "bridge-broker")
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer {
            removeDirectory(brokerDirectory)
            removeDirectory(directory)
        }
        // The subscriber's persistent session is made first and saved by the broker, so that it receives what
        // the bridge publishes however soon the bridge reconnects after the broker comes back.
        var broker = try await MosquittoBroker.start(port: port, directory: brokerDirectory, persistent: true)
        let subscriberID = "subscriber-\(UInt32.random(in: 0...UInt32.max))"
        let first = try await Collector(
            port: port, filters: ["keepalive/gw/+/state"], qos: .atLeastOnce, clientID: subscriberID, cleanStart: false)
        await first.close()
        try await broker.stop()

        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(port: port, directory: directory), devices: [kitchen],
            logger: testLogger())
        let running = RunningBridge(bridge)
        for sequence in 0..<50 {
            try bridge.submit(
                device: "kitchen", sequence: UInt64(sequence), succeeded: true, payload: recordPayload(UInt64(sequence))
            )
        }
        var statistics = bridge.statistics
        #expect(statistics.spooled == 50 && statistics.pending == 50 && !statistics.connected)

        broker = try await broker.restart()
        defer { broker.remove() }
        let subscriber = try await Collector(
            port: port, filters: ["keepalive/gw/+/state"], qos: .atLeastOnce, clientID: subscriberID, cleanStart: false)
        try await running.waitUntilDrained()
        try await waitUntil("the subscriber has 50 records") {
            subscriber.sequences(on: "keepalive/gw/kitchen/state").count >= 50
        }
        #expect(subscriber.sequences(on: "keepalive/gw/kitchen/state") == Array(0..<50))
        statistics = bridge.statistics
        #expect(statistics.delivered == 50 && statistics.pending == 0)
        await subscriber.close()
        await running.stop()
    }

    @Test func aBrokerKilledMidStreamLosesNothingAndDuplicatesOnlyWhatWasInFlight() async throws {
        var broker = try await MosquittoBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer {
            broker.remove()
            removeDirectory(directory)
        }
        // QoS 0 to the subscriber: it never owes the broker a PUBACK, so a killed broker has nothing unread from
        // it and the kernel delivers what the broker had written (no RST discarding it).
        let subscriber = try await Collector(port: broker.port, filters: ["keepalive/gw/+/state"], qos: .atMostOnce)
        // The bridge comes back 2 s after the loss; the subscriber within 200 ms, so it is subscribed again first.
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(
                port: broker.port, directory: directory, reconnect: fastReconnect(.seconds(2), maximum: .seconds(2))),
            devices: [kitchen], logger: testLogger())
        let running = RunningBridge(bridge)
        try await running.waitUntilConnected()
        let count = 5_000
        for sequence in 0..<count {
            try bridge.submit(
                device: "kitchen", sequence: UInt64(sequence), succeeded: true, payload: recordPayload(UInt64(sequence))
            )
        }
        try await waitUntil("some records are delivered") { bridge.statistics.delivered >= 500 }
        broker.kill()
        let deliveredBeforeKill = bridge.statistics.delivered
        broker = try await broker.restart()
        let restarted = broker
        // The log file is appended to across restarts: the second SUBSCRIBE is the one after the restart.
        try await waitUntil("the subscriber is back", timeout: .seconds(10)) {
            restarted.log.components(separatedBy: "keepalive/gw/+/state (QoS 0)").count >= 3
        }
        try await running.waitUntilDrained()
        try await waitUntil("the subscriber has every record", timeout: .seconds(20)) {
            Set(subscriber.sequences(on: "keepalive/gw/kitchen/state")).count == count
        }
        let received = subscriber.sequences(on: "keepalive/gw/kitchen/state")
        #expect(Set(received) == Set((0..<count).map(UInt64.init)))
        // Only records of the batch in flight at the kill, each at most twice more (sent again by us from the
        // acknowledged mark, and perhaps by libmosquitto).
        let window = MQTTBridge.deliveryWindow
        #expect(received.count - count <= 2 * window, "duplicates: \(received.count - count)")
        let duplicated = Dictionary(grouping: received, by: { $0 }).filter { $0.value.count > 1 }.keys
        if let low = duplicated.min(), let high = duplicated.max() {
            #expect(high - low < UInt64(window), "duplicates from \(low) to \(high)")
        }
        // In order: each record first arrives after every earlier one.
        var firstArrival: [UInt64] = []
        var seen = Set<UInt64>()
        for sequence in received where seen.insert(sequence).inserted { firstArrival.append(sequence) }
        #expect(firstArrival == firstArrival.sorted())
        #expect(deliveredBeforeKill < UInt64(count), "the kill came too late to test anything")
        await subscriber.close()
        await running.stop()
    }

    /// Catches: the direct route (`submit` handing the only pending record to the client, the client's thread moving
    /// the mark) losing a record whose PUBACK never came, sending one out of order beside the delivery task, or
    /// leaving the spool's route taken so that nothing is delivered any more.
    @Test func aRecordSubmittedWhileIdleGoesStraightToTheClientAndOneWithoutItsPUBACKIsSentAgain() async throws {
        var broker = try await MosquittoBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer {
            broker.remove()
            removeDirectory(directory)
        }
        let subscriber = try await Collector(port: broker.port, filters: ["keepalive/gw/+/state"], qos: .atLeastOnce)
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(
                port: broker.port, directory: directory,
                reconnect: fastReconnect(.milliseconds(200), maximum: .milliseconds(400))),
            devices: [kitchen], logger: testLogger())
        let running = RunningBridge(bridge)
        try await running.waitUntilConnected()
        // Everything the direct route asks for: nothing pending or out for delivery, nothing queued or being
        // flushed (after a reconnection the announcements are; under ThreadSanitizer a record submitted while they
        // were went through the delivery task).
        @Sendable func idle() -> Bool {
            bridge.statistics.pending == 0 && bridge.spool.withLock { $0.outForDelivery == .none }
                && bridge.state.withLock { $0.connected && $0.outgoing.isEmpty && !$0.flushing }
        }
        // Records spread out, as polls end over a tick: after the first (whose availability and failures topics
        // go through the delivery task), each goes straight to the client.
        for sequence in 0..<20 {
            try await waitUntil("record \(sequence) may go straight") { idle() }
            try bridge.submit(
                device: "kitchen", sequence: UInt64(sequence), succeeded: true, payload: recordPayload(UInt64(sequence))
            )
        }
        try await running.waitUntilDrained()
        #expect(bridge.state.withLock { $0.handedDirectly } >= 19)
        // Then a burst behind a direct one: in order, the rest by the delivery task.
        for sequence in 20..<300 {
            try bridge.submit(
                device: "kitchen", sequence: UInt64(sequence), succeeded: true, payload: recordPayload(UInt64(sequence))
            )
        }
        try await running.waitUntilDrained()
        try await waitUntil("the subscriber has 300 records") {
            subscriber.sequences(on: "keepalive/gw/kitchen/state").count >= 300
        }
        #expect(subscriber.sequences(on: "keepalive/gw/kitchen/state") == Array(0..<300))
        #expect(bridge.statistics.delivered == 300)

        // A direct record whose PUBACK never comes (the broker stopped, then killed): still pending, sent again
        // after the next connection.
        try await waitUntil("idle") { idle() }
        broker.signal(SIGSTOP)
        let handedBefore = bridge.state.withLock { $0.handedDirectly }
        try bridge.submit(device: "kitchen", sequence: 300, succeeded: true, payload: recordPayload(300))
        #expect(bridge.state.withLock { $0.handedDirectly } == handedBefore + 1, "handed straight to the client")
        broker.kill()  // SIGKILL ends a stopped process: the PUBLISH is never acknowledged
        try await waitUntil("the connection is lost") { !bridge.statistics.connected }
        #expect(bridge.statistics.pending == 1 && bridge.statistics.delivered == 300)
        broker = try await broker.restart()
        try await running.waitUntilDrained()
        #expect(bridge.statistics.delivered == 301)
        try await waitUntil("idle again") { idle() }
        try bridge.submit(device: "kitchen", sequence: 301, succeeded: true, payload: recordPayload(301))
        #expect(bridge.state.withLock { $0.handedDirectly } == handedBefore + 2, "the direct route is free again")
        try await running.waitUntilDrained()
        #expect(bridge.statistics.delivered == 302)
        await subscriber.close()
        await running.stop()
    }

    /// Catches: a record taking the direct route ahead of the discovery config its own new reading queued (Home
    /// Assistant drops a value for a sensor it does not know yet, and the state is not retained).
    @Test func aRecordWithANewReadingArrivesAfterThatSensorsConfigEvenWhenTheDirectRouteIsFree() async throws {
        let broker = try await MosquittoBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer {
            broker.remove()
            removeDirectory(directory)
        }
        let seen = try await Collector(
            port: broker.port, filters: ["homeassistant/sensor/gw/+/config", "keepalive/gw/+/state"])
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(port: broker.port, directory: directory), devices: [kitchen],
            logger: testLogger())
        let running = RunningBridge(bridge)
        try await running.waitUntilConnected()
        try bridge.submit(device: "kitchen", sequence: 0, succeeded: true, payload: recordPayload(0))
        try await waitUntil("idle, the direct route free") {
            bridge.statistics.pending == 0 && bridge.state.withLock { $0.outgoing.isEmpty && !$0.flushing }
        }
        for (sequence, name) in [(1, "pressure"), (2, "illuminance")] {
            try bridge.submit(
                device: "kitchen", sequence: UInt64(sequence), succeeded: true,
                readings: [Reading(name: name, value: .number(3), unit: name == "pressure" ? "Pa" : "lx")],
                payload: recordPayload(UInt64(sequence)))
            try await running.waitUntilDrained()
            try await seen.wait(for: "homeassistant/sensor/gw/aabbccddee01_\(name)/config")
            try await waitUntil("record \(sequence) arrived") {
                seen.sequences(on: "keepalive/gw/kitchen/state").contains(UInt64(sequence))
            }
            let order = seen.messages.map(\.topic)
            let config = try #require(order.firstIndex(of: "homeassistant/sensor/gw/aabbccddee01_\(name)/config"))
            let state = try #require(
                seen.messages.firstIndex {
                    $0.topic == "keepalive/gw/kitchen/state"
                        && (jsonObject($0.payload)?["seq"] as? NSNumber)?.intValue == sequence
                })
            #expect(config < state, "\(name): the config came after the value: \(order)")
        }
        await seen.close()
        await running.stop()
    }

    @Test func aBurstOfAThousandRecordsIsDeliveredInSeqOrderAWindowAtATime() async throws {
        let broker = try await MosquittoBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer {
            broker.remove()
            removeDirectory(directory)
        }
        let subscriber = try await Collector(port: broker.port, filters: ["keepalive/gw/+/state"], qos: .atLeastOnce)
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(port: broker.port, directory: directory), devices: [kitchen],
            logger: testLogger())
        // Spooled before the bridge runs: the first connection finds a burst to deliver.
        for sequence in 0..<1_000 {
            try bridge.submit(
                device: "kitchen", sequence: UInt64(sequence), succeeded: true, payload: recordPayload(UInt64(sequence))
            )
        }
        let running = RunningBridge(bridge)
        try await running.waitUntilDrained()
        try await waitUntil("the subscriber has 1,000 records") {
            subscriber.sequences(on: "keepalive/gw/kitchen/state").count >= 1_000
        }
        #expect(subscriber.sequences(on: "keepalive/gw/kitchen/state") == Array(0..<1_000))
        // A window of records was in flight at once, never more.
        #expect(bridge.state.withLock { $0.largestDeliveryBatch } == MQTTBridge.deliveryWindow)

        // A burst submitted while connected: in order after the first, and the spool is acknowledged whole.
        for sequence in 1_000..<2_000 {
            try bridge.submit(
                device: "kitchen", sequence: UInt64(sequence), succeeded: true, payload: recordPayload(UInt64(sequence))
            )
        }
        try await running.waitUntilDrained()
        try await waitUntil("the subscriber has 2,000 records") {
            subscriber.sequences(on: "keepalive/gw/kitchen/state").count >= 2_000
        }
        #expect(subscriber.sequences(on: "keepalive/gw/kitchen/state") == Array(0..<2_000))
        #expect(bridge.statistics.delivered == 2_000)
        #expect(bridge.state.withLock { $0.largestDeliveryBatch } <= MQTTBridge.deliveryWindow)
        await subscriber.close()
        await running.stop()
    }

    /// A bridge with `drainBound` in a service group (as the daemon runs it), connected to a fresh broker, with a
    /// fresh spool; `body` gets the broker, the bridge, the group and the group's run.
    func withShutdownSetup(
        drainBound: Duration,
        _ body: (MosquittoBroker, MQTTBridge, ServiceGroup, Task<Void, any Error>) async throws -> Void
    ) async throws {
        let broker = try await MosquittoBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer {
            broker.signal(SIGCONT)
            broker.remove()
            removeDirectory(directory)
        }
        var configuration = bridgeConfiguration(port: broker.port, directory: directory)
        configuration.shutdownDrainBound = drainBound
        let bridge = try MQTTBridge(configuration: configuration, devices: [kitchen], logger: testLogger())
        let group = ServiceGroup(services: [bridge], logger: testLogger())
        let running = Task { try await group.run() }
        defer { running.cancel() }
        try await waitUntil("the bridge is connected", timeout: .seconds(60)) { bridge.statistics.connected }
        try await body(broker, bridge, group, running)
    }

    func submit(_ sequences: Range<Int>, to bridge: MQTTBridge) throws {
        for sequence in sequences {
            try bridge.submit(
                device: "kitchen", sequence: UInt64(sequence), succeeded: true, payload: recordPayload(UInt64(sequence))
            )
        }
    }

    /// Catches: a graceful shutdown that stops delivering at once, leaving what was spooled and not yet handed to
    /// the client in the spool. In the daemon the bridge is the last part to stop, and records written by the last
    /// polls were waiting for the delivery loop when it was cancelled: a CI run's subscriber never got them.
    @Test func aGracefulShutdownDeliversWhatIsSpooledWithinTheDrainBound() async throws {
        try await withShutdownSetup(drainBound: .seconds(30)) { broker, bridge, group, running in
            let subscriber = try await Collector(
                port: broker.port, filters: ["keepalive/gw/+/state"], qos: .atLeastOnce)
            // A burst, then the shutdown at once: most of it is still in the spool when the shutdown comes.
            try submit(0..<2_000, to: bridge)
            let pendingAtShutdown = bridge.statistics.pending
            await group.triggerGracefulShutdown()
            try await running.value
            #expect(bridge.statistics.pending == 0, "\(pendingAtShutdown) were pending at the shutdown")
            try await waitUntil("the subscriber has 2,000 records") {
                subscriber.sequences(on: "keepalive/gw/kitchen/state").count >= 2_000
            }
            #expect(subscriber.sequences(on: "keepalive/gw/kitchen/state") == Array(0..<2_000))
            await subscriber.close()
        }
    }

    /// Catches: a shutdown that waits out its drain bound for a broker that is gone. The records stay in the
    /// spool for the next start.
    @Test func aGracefulShutdownWithTheBrokerGoneKeepsTheSpoolAndDoesNotWaitForTheBound() async throws {
        try await withShutdownSetup(drainBound: .seconds(600)) { broker, bridge, group, running in
            broker.kill()
            try await waitUntil("the bridge has lost the broker", timeout: .seconds(60)) {
                !bridge.statistics.connected
            }
            try submit(0..<10, to: bridge)
            await group.triggerGracefulShutdown()
            // A give-up far under the bound: the shutdown ends when the drain sees no connection.
            try await withTimeout("the shutdown", .seconds(60)) { try await running.value }
            #expect(bridge.statistics.pending == 10, "kept for the next start")
        }
    }

    /// Catches: a shutdown held by a broker that keeps its socket open and answers nothing (stopped, or its host
    /// frozen). The drain ends at its bound, and `offline`'s QoS 1 publish used to wait for a PUBACK until the
    /// keep-alive gave up (119 s here): past systemd's `TimeoutStopSec=10s`, so a SIGKILL.
    @Test func aGracefulShutdownAgainstAStoppedBrokerEndsWithinItsBounds() async throws {
        try await withShutdownSetup(drainBound: .seconds(1)) { broker, bridge, group, running in
            broker.signal(SIGSTOP)
            try submit(0..<10, to: bridge)
            let started = ContinuousClock.now
            await group.triggerGracefulShutdown()
            // The drain's 1 s, then `offline`'s 2 s: the give-up is far from both and far under the keep-alive.
            try await withTimeout("the shutdown", .seconds(30)) { try await running.value }
            print("a shutdown against a stopped broker took \(ContinuousClock.now - started)")
            #expect(bridge.statistics.pending == 10, "never acknowledged, kept for the next start")
        }
    }

    @Test func aFullSpoolDropsTheOldestAndPublishesTheCountOnReconnect() async throws {
        let port = try freeLoopbackPort()
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer { removeDirectory(directory) }
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(port: port, directory: directory, spoolLimit: 4_096), devices: [kitchen],
            logger: testLogger())
        let running = RunningBridge(bridge)
        for sequence in 0..<100 {
            try bridge.submit(
                device: "kitchen", sequence: UInt64(sequence), succeeded: true, payload: recordPayload(UInt64(sequence))
            )
        }
        let dropped = bridge.statistics.dropped
        #expect(dropped > 0)
        #expect(UInt64(bridge.statistics.pending) + dropped == 100)

        let broker = try await MosquittoBroker.start(port: port)
        defer { broker.remove() }
        try await running.waitUntilDrained()
        let late = try await Collector(port: port, filters: ["keepalive/gw/dropped"])
        let message = try await late.wait(for: "keepalive/gw/dropped") { $0.retain }
        #expect(String(decoding: message.payload, as: UTF8.self) == "\(dropped)")
        #expect(bridge.statistics.delivered + dropped == 100)
        await late.close()
        await running.stop()
    }

    @Test func aBitFlippedInTheSpoolWhileTheDaemonWasDownCostsOneRecordAndIsPublishedAsDropped() async throws {
        let broker = try await MosquittoBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer {
            broker.remove()
            removeDirectory(directory)
        }
        do {
            // 12 records of two devices while the broker was away, then a crash (dropped, no close, no flush).
            let crashed = try MQTTBridge(
                configuration: bridgeConfiguration(port: broker.port, directory: directory, syncPolicy: .everyRecord),
                devices: [kitchen, cellar], logger: testLogger())
            for sequence in 0..<12 {
                let device = sequence % 2 == 0 ? "kitchen" : "cellar"
                try crashed.submit(
                    device: device, sequence: UInt64(sequence), succeeded: true,
                    payload: recordPayload(UInt64(sequence), device: device))
            }
        }
        // One bit flips half way into the segment, as on an SD card.
        let name = try #require(
            try FileManager.default.contentsOfDirectory(atPath: directory).first { $0.hasPrefix("segment-") })
        let size = try #require(try FileManager.default.attributesOfItem(atPath: directory + "/" + name)[.size] as? Int)
        try flipBits(0x10, at: size / 2, of: directory + "/" + name)

        let subscriber = try await Collector(
            port: broker.port, filters: ["keepalive/gw/+/state", "keepalive/gw/dropped"])
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(port: broker.port, directory: directory), devices: [kitchen, cellar],
            logger: testLogger())
        #expect(bridge.statistics.pending == 11 && bridge.statistics.dropped == 1 && bridge.statistics.corrupt == 1)
        let running = RunningBridge(bridge)
        try await running.waitUntilDrained()
        let delivered: @Sendable () -> [UInt64] = {
            subscriber.sequences(on: "keepalive/gw/kitchen/state")
                + subscriber.sequences(on: "keepalive/gw/cellar/state")
        }
        try await waitUntil("11 records arrive") { delivered().count >= 11 }
        let lost = Set(0..<12).subtracting(delivered().map { Int($0) })
        #expect(lost.count == 1 && delivered().count == 11, "delivered \(delivered().sorted())")
        let dropped = try await subscriber.wait(for: "keepalive/gw/dropped") { _ in true }
        #expect(String(decoding: dropped.payload, as: UTF8.self) == "1")
        await subscriber.close()
        await running.stop()
    }

    @Test func afterACrashEverythingSpooledAndNotAcknowledgedIsReplayedAndATornTailSkipped() async throws {
        let broker = try await MosquittoBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer {
            broker.remove()
            removeDirectory(directory)
        }
        do {
            // Never run: the records are only in the spool when the bridge is dropped (no close, no flush).
            let crashed = try MQTTBridge(
                configuration: bridgeConfiguration(port: broker.port, directory: directory, syncPolicy: .everyRecord),
                devices: [kitchen], logger: testLogger())
            for sequence in 0..<20 {
                try crashed.submit(
                    device: "kitchen", sequence: UInt64(sequence), succeeded: true,
                    payload: recordPayload(UInt64(sequence)))
            }
        }
        // The crash tore the last record: its last bytes never reached the disk.
        let segments = try FileManager.default.contentsOfDirectory(atPath: directory).filter {
            $0.hasPrefix("segment-")
        }.sorted()
        let segment = directory + "/" + (try #require(segments.last))
        let size = try #require(try FileManager.default.attributesOfItem(atPath: segment)[.size] as? Int)
        #expect(truncate(segment, off_t(size - 5)) == 0)

        let subscriber = try await Collector(port: broker.port, filters: ["keepalive/gw/+/state"])
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(port: broker.port, directory: directory), devices: [kitchen],
            logger: testLogger())
        #expect(bridge.statistics.pending == 19 && bridge.statistics.corrupt == 1)
        let running = RunningBridge(bridge)
        try await running.waitUntilDrained()
        try await waitUntil("19 records arrive") { subscriber.sequences(on: "keepalive/gw/kitchen/state").count >= 19 }
        #expect(subscriber.sequences(on: "keepalive/gw/kitchen/state") == Array(0..<19))
        await subscriber.close()
        await running.stop()
    }
}
