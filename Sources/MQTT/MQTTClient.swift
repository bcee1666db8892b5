import Basics

/// An MQTT client over libmosquitto: one connection, one thread, awaited completions.
///
/// - `connect()` makes one attempt and returns on CONNACK (or throws, naming the broker and user). Once a
///   connection has succeeded, a lost one is re-established by itself after ``MQTTReconnectPolicy``'s delay, and
///   ``events`` tells of every change (a bridge replays its spool on `.connected(sessionPresent: false, …)`).
/// - `publish` returns when the message is acknowledged: QoS 0 when written to the socket, QoS 1 on PUBACK,
///   QoS 2 on PUBCOMP. While not connected it fails at once with `.disconnected`; publishes in flight when the
///   connection drops fail with `.disconnected` too (never hang). The caller (a spool) retries them; libmosquitto
///   may also send a QoS 1/2 message it had in flight again after the reconnection, so a retried message can
///   arrive twice: delivery across a reconnection is at least once. `publish(batch:)` hands several messages
///   to the client's thread in one hop, in order, and returns one outcome per message (a pipelined spool).
/// - `subscribe` returns the QoS the broker granted on SUBACK; messages of all subscriptions arrive in
///   ``messages``. Subscriptions are sent again after a CONNACK without a session.
/// - Cancelling a task stops its wait with `.cancelled`; a message already handed to libmosquitto may still go.
/// - `close(publishing:)` publishes the given messages, sends a normal DISCONNECT (the broker then discards the
///   will) and ends the thread.
///
/// ```swift
/// let client = try MQTTClient(configuration: MQTTConfiguration(
///     host: "broker.lan", clientID: "keepalive-kitchen",
///     will: .init(topic: "keepalive/kitchen/status", payload: Array("offline".utf8))))
/// try await client.connect()
/// try await client.publish(topic: "keepalive/kitchen/status", payload: Array("online".utf8), qos: .atLeastOnce,
/// retain: true)
/// await client.close(publishing: [.init(topic: "keepalive/kitchen/status", payload: Array("offline".utf8), retain:
/// true)])
/// ```
public final class MQTTClient: Sendable {
    public let configuration: MQTTConfiguration
    /// Messages of every subscription, in arrival order. One consumer; buffered without bound.
    public let messages: AsyncStream<MQTTMessage>
    /// Connection changes, in order. One consumer; buffered without bound. Finishes on close.
    public let events: AsyncStream<MQTTConnectionEvent>
    private let core: ClientCore
    private let thread: ClientThread
    private let tokens = Locked<UInt64>(0)

    /// Loads libmosquitto (`libmosquitto.so.1`) now, as the first client would: a program that needs MQTT can
    /// fail at start, before it does anything else. The library is not linked, so a program that makes no
    /// client never maps it or OpenSSL. Loading happens once; later calls return the first outcome.
    ///
    /// - Throws: `.libraryUnavailable`, naming the library, the package that provides it and `dlerror`'s text.
    public static func loadLibrary() throws(MQTTError) {
        _ = try LibMosquitto.shared.get()
    }

    /// Creates the client and its thread; nothing is sent before ``connect()``. `random` jitters the
    /// reconnection delays (inject a seeded one in tests).
    ///
    /// - Throws: `.invalidArgument` for a client id, will or user name libmosquitto rejects; `.invalidTopic`
    ///   for the will's topic; `.tls` for TLS files it cannot use; `.systemCall` when out of threads or
    ///   descriptors; `.libraryUnavailable` when libmosquitto cannot be loaded (see ``loadLibrary()``).
    public init(
        configuration: MQTTConfiguration, random: some RandomNumberGenerator & Sendable = SystemRandomNumberGenerator()
    ) throws(MQTTError) {
        self.configuration = configuration
        let (messages, messageContinuation) = AsyncStream<MQTTMessage>.makeStream()
        let (events, eventContinuation) = AsyncStream<MQTTConnectionEvent>.makeStream()
        self.messages = messages
        self.events = events
        let thread = try ClientThread(name: configuration.threadName)
        let core = ClientCore(
            configuration: configuration, thread: thread, random: random, messages: messageContinuation,
            events: eventContinuation)
        do {
            try core.setUp()
        } catch {
            thread.stop()
            throw error
        }
        self.thread = thread
        self.core = core
    }

    deinit {
        // Not closed by the owner: disconnect normally and let the thread end (the core lives until then).
        let core = self.core
        thread.async { core.close(0, nil) }
    }

    /// Connects and waits for CONNACK; returns at once when connected already.
    ///
    /// - Throws: `.notAuthorized` (the message names the broker `host:port` and the user, never the password),
    ///   `.connectionRefused` (unreachable, or refused for another reason, with mosquitto's text), `.tls`
    ///   (certificate not trusted or not for the host, or a port that does not speak TLS), `.timeout` (the broker
    ///   took the connection but sent no CONNACK within ``MQTTConfiguration/connectTimeout``), `.cancelled`,
    ///   `.closed`.
    @discardableResult
    public func connect() async throws(MQTTError) -> MQTTConnectResult {
        try await perform("CONNACK") { core, token, completion in core.connect(token, completion) }
    }

    /// Publishes and waits for the acknowledgement its QoS has (see the type's documentation).
    ///
    /// `properties` are sent under MQTT 5 and silently dropped under 3.1.1.
    ///
    /// - Throws: `.invalidTopic` (nothing sent), `.disconnected`, `.publishRefused` (an MQTT 5 reason code ≥ 0x80),
    ///   `.invalidArgument` (e.g. a payload over the broker's limit), `.cancelled`, `.closed`.
    public func publish(
        topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
        properties: MQTTProperties = MQTTProperties()
    ) async throws(MQTTError) {
        try await publish(
            MQTTOutgoingMessage(topic: topic, payload: payload, qos: qos, retain: retain, properties: properties))
    }

    public func publish(_ message: MQTTOutgoingMessage) async throws(MQTTError) {
        try MQTTTopic.validatePublish(message.topic)
        try await perform("the acknowledgement of a publish to \"\(message.topic)\"") { core, token, completion in
            core.publish(token, message, completion)
        }
    }

    /// Publishes `message` as ``publish(_:)`` does, without a task: `completion` runs on the client's thread once the
    /// message has the acknowledgement its QoS has or has failed (at once, on the caller's thread, for an invalid
    /// topic or a closed client). For a caller that finishes its work there — the bridge moves its spool's
    /// acknowledged mark — so that no task is resumed per message. `completion` must be short and must not block.
    public func publish(
        _ message: MQTTOutgoingMessage, completion: @escaping @Sendable (Result<Void, MQTTError>) -> Void
    ) {
        do {
            try MQTTTopic.validatePublish(message.topic)
        } catch {
            completion(.failure(error))
            return
        }
        let token = tokens.withLock { value -> UInt64 in
            value += 1
            return value
        }
        let core = self.core
        if !thread.async({ core.publish(token, message, completion) }) { completion(.failure(.closed())) }
    }

    /// Publishes `messages` in this order and returns one outcome per message, in the same order, once each has
    /// the acknowledgement its QoS has (as ``publish(_:)``) or has failed.
    ///
    /// The whole batch reaches the client's thread in one hop, so the messages go on the wire in this order (separate
    /// `publish` calls from several tasks may reach it in another) and are in flight together: up to
    /// ``MQTTConfiguration/maximumInflight`` at once, libmosquitto queueing the rest in order. A message's own
    /// failure (`.invalidTopic`, `.publishRefused`, `.invalidArgument` for a payload over the broker's limit)
    /// leaves the others going. A lost connection fails every message not yet acknowledged with `.disconnected`
    /// (and none after a message that could not be sent goes out), so a caller that retries from its first failure
    /// keeps the order, with at-least-once duplicates of what was in flight. While not connected every message fails
    /// with `.disconnected` at once; cancelling fails those still waiting with `.cancelled`, closing with `.closed`.
    public func publish(batch messages: [MQTTOutgoingMessage]) async -> [Result<Void, MQTTError>] {
        guard !messages.isEmpty else { return [] }
        do {
            return try await perform("the acknowledgements of \(messages.count) publishes") { core, token, completion in
                core.publish(token, batch: messages, completion)
            }
        } catch {
            return Array(repeating: .failure(error), count: messages.count)
        }
    }

    /// Subscribes and returns the QoS the broker granted.
    ///
    /// - Throws: `.invalidTopic` (nothing sent), `.subscriptionRefused` (SUBACK 0x80 or a reason code ≥ 0x80),
    ///   `.disconnected`, `.cancelled`, `.closed`.
    @discardableResult
    public func subscribe(_ filter: String, qos: MQTTQoS = .atLeastOnce) async throws(MQTTError) -> MQTTQoS {
        try MQTTTopic.validateFilter(filter)
        return try await perform("SUBACK for \"\(filter)\"") { core, token, completion in
            core.subscribe(token, filter: filter, qos: qos, completion)
        }
    }

    /// Publishes `messages` (while connected; failures are ignored: the will or the retained state covers
    /// them), then sends a normal DISCONNECT, so the broker discards the will. Ends the thread, closes the
    /// socket, epoll descriptor and eventfd, and finishes ``messages`` and ``events``; the mosquitto object is
    /// freed when the client is. Operations still waiting fail with `.closed`.
    ///
    /// The publishes get `within` together (2 s by default): a broker that keeps the socket open but stops
    /// answering (a stopped process, a frozen host) would otherwise hold a QoS 1 or 2 publish until the keep-alive
    /// gives up, one and a half keep-alives later. Whatever is left then is abandoned (`.cancelled`); the
    /// DISCONNECT has its own two seconds to be written.
    public func close(publishing messages: [MQTTOutgoingMessage] = [], within bound: Duration = .seconds(2)) async {
        if !messages.isEmpty {
            let publishes = Task {
                for message in messages {
                    try? await publish(message)
                }
            }
            let timer = TimerThread.shared.schedule(at: TimerThread.now() + bound) { publishes.cancel() }
            await publishes.value
            TimerThread.shared.cancel(timer)
        }
        _ =
            try? await perform("the close") { (core, token, completion: @escaping ClientCore.Completion<Void>) in
                core.close(token, completion)
            } as Void
    }

    public var statistics: MQTTStatistics {
        MQTTStatistics(wakeups: thread.wakeups.withLock { $0 })
    }

    /// Shuts the socket down without DISCONNECT, as a crash would: the broker publishes the will and the client
    /// reconnects by itself. For tests.
    package func dropConnectionForTesting() async {
        let core = self.core
        _ =
            try? await perform("the drop") { (_, _, completion: @escaping ClientCore.Completion<Void>) in
                core.dropConnection()
                completion(.success(()))
            } as Void
    }

    /// libmosquitto's socket descriptor now (-1 without one), read on the client's thread. For tests.
    package func socketDescriptorForTesting() async -> Int32 {
        let core = self.core
        return
            (try? await perform("the socket") { (_, _, completion: @escaping ClientCore.Completion<Int32>) in
                completion(.success(core.socketDescriptor))
            }) ?? -1
    }

    // MARK: Awaiting the thread

    /// Runs `start` on the client's thread with a fresh token and waits for its completion; cancellation
    /// reaches the operation through `ClientCore.cancel(_:)`.
    private func perform<Value: Sendable>(
        _ what: String,
        _ start: @escaping @Sendable (ClientCore, UInt64, @escaping ClientCore.Completion<Value>) -> Void
    ) async throws(MQTTError) -> Value {
        let token = tokens.withLock { value -> UInt64 in
            value += 1
            return value
        }
        let core = self.core
        let thread = self.thread
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Value, MQTTError>, Never>) in
                if Task.isCancelled {
                    continuation.resume(returning: .failure(.cancelled(what)))
                    return
                }
                let queued = thread.async {
                    start(core, token) { continuation.resume(returning: $0) }
                }
                if !queued { continuation.resume(returning: .failure(.closed())) }
            }
        } onCancel: {
            thread.async { core.cancel(token) }
        }
        return try result.get()
    }
}
