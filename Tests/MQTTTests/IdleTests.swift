import LocalServices
import TestHarness
import Foundation
import Basics
import MQTT
import Testing

@Suite struct IdleTests {
    @Test func anIdleConnectedClientsThreadDoesNotWakeUpBetweenKeepAlives() async throws {
        let broker = try await Broker.start()
        defer { broker.remove() }
        var settings = configuration(broker, keepAlive: .seconds(60))
        settings.threadName = "mqtt-idle"
        let client = try MQTTClient(configuration: settings)
        try await client.connect()
        try await client.subscribe("idle/#")
        try await client.publish(topic: "idle/x", payload: [], qos: .exactlyOnce)
        // Let the last packets (the echo of idle/x) settle: the count must stop moving.
        let previous = Locked(-1)
        try await waitUntil("the thread is quiet") {
            let now = client.statistics.wakeups
            return previous.withLock { last in
                defer { last = now }
                return now == last
            }
        }
        let thread = try #require(threadIDs(named: "mqtt-idle").first)
        let wakeupsBefore = client.statistics.wakeups
        let switchesBefore = try #require(voluntaryContextSwitches(thread: thread))
        try await Task.sleep(for: .seconds(3))  // the measurement window itself, not a wait for a condition
        let wakeups = client.statistics.wakeups - wakeupsBefore
        let switches = try #require(voluntaryContextSwitches(thread: thread)) - switchesBefore
        print("idle 3 s: \(wakeups) epoll wake-ups, \(switches) voluntary context switches of the client's thread")
        #expect(wakeups == 0)
        #expect(switches == 0)
        await client.close()
    }

    /// Catches: a client thread that spins a core after its connection is lost, when another process had inherited
    /// the socket. libmosquitto opens it without close-on-exec, so every process spawned meanwhile (a test's broker,
    /// whatever an app that embeds the client starts) held it; the socket then outlived libmosquitto's close, and so
    /// did its epoll registration, which could no longer be removed by its closed number. ThreadSanitizer's suite had
    /// ten client threads spinning so, for good. Here a `dup` stands for the inheriting process (whatever opens the
    /// socket before the client sees it, a spawn can still catch).
    @Test func aLostConnectionWhoseSocketAnotherHolderKeepsOpenDoesNotSpinTheThread() async throws {
        let broker = try await Broker.start()
        defer { broker.remove() }
        var settings = configuration(broker)
        // No reconnection within the test: the thread has only the lost socket to wait on.
        settings.reconnect = MQTTReconnectPolicy(initialDelay: .seconds(60), maximumDelay: .seconds(60), jitter: 0)
        let client = try MQTTClient(configuration: settings)
        let events = EventLog(client)
        try await client.connect()
        let socket = await client.socketDescriptorForTesting()
        try #require(socket >= 0)
        #expect(fcntl(socket, F_GETFD) & FD_CLOEXEC != 0, "libmosquitto's socket is made close-on-exec")
        let inherited = dup(socket)
        try #require(inherited >= 0)
        defer { close(inherited) }

        broker.kill()
        try await waitUntil("the client saw the connection go") { events.disconnections == 1 }
        let before = client.statistics.wakeups
        try await Task.sleep(for: .seconds(1))  // the measurement window itself, not a wait for a condition
        let wakeups = client.statistics.wakeups - before
        print("1 s after the lost connection, with the socket held elsewhere: \(wakeups) epoll wake-ups")
        #expect(wakeups <= 2, "the client's thread spins on the lost socket")
        await client.close()
    }

    @Test func aShortKeepAlivePingsAndStaysConnected() async throws {
        let broker = try await Broker.start()
        defer { broker.remove() }
        let client = try MQTTClient(configuration: configuration(broker, clientID: "pinger", keepAlive: .seconds(5)))
        let events = EventLog(client)
        try await client.connect()
        let before = client.statistics.wakeups
        // Past one keep-alive period the client must have sent PINGREQ (the broker logs it with log_type all).
        try await waitUntil("the broker saw PINGREQ", timeout: .seconds(12)) {
            broker.log.contains("Received PINGREQ from pinger")
        }
        try await client.publish(topic: "still/here", payload: [])
        #expect(events.disconnections == 0)
        // One wake-up for the keep-alive deadline, one for the PINGRESP, a few for the publish: not one per second.
        #expect(client.statistics.wakeups - before < 10)
        await client.close()
    }
}
