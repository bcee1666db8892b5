import CLinux
import CMosquitto
import Basics

#if canImport(Glibc)
    import Glibc
#endif

/// The state of one MQTT connection, confined to its `ClientThread`: every method runs there, and so does
/// every libmosquitto callback (they only run inside the `mosquitto_*` calls made here).
///
/// The network loop is libmosquitto's `loop_read`/`loop_write`/`loop_misc`, driven by readiness of
/// `mosquitto_socket()` (EPOLLIN always, EPOLLOUT only while `mosquitto_want_write()`), and by one deadline:
/// the next keep-alive check while connected, the end of ``MQTTConfiguration/connectTimeout`` while connecting,
/// the next reconnection while not. Idle, nothing is due before the keep-alive, so the thread sleeps until then.
final class ClientCore: @unchecked Sendable {
    // @unchecked Sendable: all mutable state is touched on `thread` only (the `MQTTClient` methods hop there
    // with `thread.async`); `configuration`, `thread`, the stream continuations are immutable and Sendable.
    typealias Completion<Value> = @Sendable (Result<Value, MQTTError>) -> Void

    private enum Operation {
        case connect(Completion<MQTTConnectResult>)
        case publish(mid: Int32, Completion<Void>)
        case publishBatch(PublishBatch)
        case subscribe(mid: Int32, filter: String, qos: MQTTQoS, Completion<MQTTQoS>)
        case close(Completion<Void>)
    }

    /// The outcomes of one `publish(_:batch:_:)`, filled in as its acknowledgements come; completes once every
    /// message has one. A class: the operations table holds it while `publishTokens` leads each mid to it.
    private final class PublishBatch {
        private var results: [Result<Void, MQTTError>?]
        private var open: Int
        private let completion: Completion<[Result<Void, MQTTError>]>
        /// The index of each message awaiting its acknowledgement, by message id.
        var mids: [Int32: Int] = [:]

        init(count: Int, _ completion: @escaping Completion<[Result<Void, MQTTError>]>) {
            results = Array(repeating: nil, count: count)
            open = count
            self.completion = completion
        }

        var isSettled: Bool { open == 0 }

        func settle(_ index: Int, _ result: Result<Void, MQTTError>) {
            guard results[index] == nil else { return }
            results[index] = result
            open -= 1
        }

        /// Fails every message without an outcome yet with `error`.
        func failOpen(_ error: MQTTError) {
            for index in results.indices where results[index] == nil { settle(index, .failure(error)) }
            mids.removeAll()
        }

        /// Calls the completion; every message must have its outcome.
        func complete() {
            completion(.success(results.map { $0 ?? .failure(.closed()) }))
        }
    }

    private enum State: Equatable {
        /// Never connected, or the first connect failed: nothing is scheduled.
        case idle
        case connecting(automatic: Bool)
        case connected
        /// Lost after a successful connection: a reconnection is the deadline.
        case waitingToReconnect
        case closing
        case closed
    }

    let configuration: MQTTConfiguration
    let thread: ClientThread
    private(set) var handle: MosquittoHandle!
    private var random: ErasedRandom
    private let messages: AsyncStream<MQTTMessage>.Continuation
    private let events: AsyncStream<MQTTConnectionEvent>.Continuation

    private var state = State.idle
    var protocolVersion: MQTTProtocolVersion
    private var hasConnected = false
    private var sessionPresent = false
    private var operations: [UInt64: Operation] = [:]
    private var publishTokens: [Int32: UInt64] = [:]
    private var subscribeTokens: [Int32: UInt64] = [:]
    /// Filters confirmed by SUBACK, in order, sent again after a CONNACK without a session.
    private var subscriptions: [(filter: String, qos: MQTTQoS)] = []
    private var reconnectAttempt = 0

    // Per connection attempt (internal for ClientCore+Errors.swift; on the thread only).
    /// Why the attempt failed, when that is known before libmosquitto closes the socket (a CONNACK refusal, no
    /// answer in time): reported rather than the closing's own error (a lost connection).
    private var attemptError: MQTTError?
    var fallBackToV311 = false
    var firstLoggedError: String?
    /// With TLS, what the broker sent first (see ``TLSAnswer``).
    var tlsAnswer = TLSAnswer.none
    /// When the attempt is given up if CONNACK has not come: ``MQTTConfiguration/connectTimeout`` after the TCP
    /// connection (``ClientThread/now()``); nil while no attempt has a socket.
    private var connectDeadline: Int64?
    private var isNewSocket = false

    /// With TLS, what came back first after the ClientHello, peeked before OpenSSL reads it. OpenSSL reports a
    /// port that does not speak TLS (a plain MQTT listener reads the ClientHello as a malformed packet and closes)
    /// as a failed handshake, as it does a certificate that does not verify; this tells the two apart without
    /// depending on OpenSSL's wording, which changes between versions.
    enum TLSAnswer: Equatable {
        /// Nothing yet.
        case none
        /// A TLS record (a handshake message or an alert).
        case tls
        /// The connection was closed or reset before a single byte came.
        case closed
        /// A first byte that starts no TLS record.
        case notTLS(UInt8)
    }

    /// Counts on_disconnect callbacks, so that a failed `loop_*` call that did not call it (libmosquitto's TLS
    /// handshake failure closes the socket silently) is handled as a disconnection here.
    private var disconnections = 0
    /// A QoS 0 publish completes inside `mosquitto_publish_v5` (written at once): its callback comes before the
    /// message id is known to us.
    private var isInPublishCall = false
    private var publishedDuringCall: (mid: Int32, reasonCode: Int32)?

    /// Whole seconds on CLOCK_MONOTONIC, as `mosquitto_time()` counts, of the last packet in and out: the
    /// keep-alive check is due when libmosquitto's `loop_misc` would act, at min(in, out) + keep-alive.
    private var lastIn: Int64 = 0
    private var lastOut: Int64 = 0

    init(
        configuration: MQTTConfiguration, thread: ClientThread, random: any RandomNumberGenerator,
        messages: AsyncStream<MQTTMessage>.Continuation, events: AsyncStream<MQTTConnectionEvent>.Continuation
    ) {
        self.configuration = configuration
        self.thread = thread
        self.random = ErasedRandom(base: random)
        self.messages = messages
        self.events = events
        protocolVersion = configuration.protocolVersion
    }

    static func from(_ userData: UnsafeMutableRawPointer?) -> ClientCore {
        Unmanaged<ClientCore>.fromOpaque(userData!).takeUnretainedValue()
    }

    /// Creates and configures the mosquitto object (on the caller's thread, before any work reaches the
    /// client's thread). The core must outlive the handle: it is the callbacks' user data, unretained.
    func setUp() throws(MQTTError) {
        let userData = Unmanaged.passUnretained(self).toOpaque()
        guard
            let handle = try MosquittoHandle(
                clientID: configuration.clientID, cleanSession: configuration.cleanStart, userData: userData)
        else {
            throw MQTTError(
                code: .invalidArgument, call: "mosquitto_new",
                message: "cannot create the MQTT client \"\(configuration.clientID)\" (invalid id or out of memory)")
        }
        self.handle = handle
        handle.installCallbacks()
        try check(handle.setTCPNoDelay(), "mosquitto_int_option", "cannot set TCP_NODELAY")
        try check(
            handle.setMaximumInflight(Int32(clamping: max(configuration.maximumInflight, 1))),
            "mosquitto_max_inflight_messages_set", "cannot set the maximum of messages in flight")
        if let will = configuration.will {
            try MQTTTopic.validatePublish(will.topic)
            try check(
                handle.setWill(
                    topic: will.topic, payload: will.payload, qos: Int32(will.qos.rawValue), retain: will.retain),
                "mosquitto_will_set_v5", "the last will on \"\(will.topic)\" was rejected")
        }
        if let credentials = configuration.credentials {
            try check(
                handle.setCredentials(user: credentials.user, password: credentials.password),
                "mosquitto_username_pw_set", "the user name \"\(credentials.user)\" was rejected")
        }
        if let tls = configuration.tls {
            let files = [tls.caFile, tls.caDirectory, tls.certificateFile, tls.keyFile].compactMap { $0 }
            try check(
                handle.setTLS(
                    caFile: tls.caFile, caPath: tls.caDirectory, certificateFile: tls.certificateFile,
                    keyFile: tls.keyFile),
                "mosquitto_tls_set", "the TLS files were rejected (\(files.joined(separator: ", ")))", code: .tls)
            try check(
                handle.requirePeerVerification(), "mosquitto_tls_opts_set", "cannot require certificate verification",
                code: .tls)
            try check(
                handle.setTLSInsecure(false), "mosquitto_tls_insecure_set", "cannot enable the host name check",
                code: .tls)
        }
    }

    private func check(
        _ status: MosquittoStatus, _ call: String, _ message: String, code: MQTTError.Code = .invalidArgument
    ) throws(MQTTError) {
        guard !status.isSuccess else { return }
        throw MQTTError(code: code, call: call, libraryText: status.text, message: message)
    }

    // MARK: Operations (on the thread)

    func connect(_ token: UInt64, _ completion: @escaping Completion<MQTTConnectResult>) {
        switch state {
        case .connected:
            completion(.success(MQTTConnectResult(sessionPresent: sessionPresent, protocolVersion: protocolVersion)))
        case .connecting:
            operations[token] = .connect(completion)
        case .idle, .waitingToReconnect:
            operations[token] = .connect(completion)
            attemptConnection(automatic: state == .waitingToReconnect)
        case .closing, .closed:
            completion(.failure(.closed()))
        }
    }

    func publish(_ token: UInt64, _ message: MQTTOutgoingMessage, _ completion: @escaping Completion<Void>) {
        guard state == .connected else {
            completion(.failure(notConnected("the message to \"\(message.topic)\" was not sent")))
            return
        }
        var properties: PropertyList?
        if protocolVersion == .v5 {
            switch PropertyList.publish(message.properties) {
            case .success(let list): properties = list
            case .failure(let error):
                completion(.failure(error))
                return
            }
        }
        isInPublishCall = true
        publishedDuringCall = nil
        let (status, mid) = handle.publish(
            topic: message.topic, payload: message.payload, qos: Int32(message.qos.rawValue), retain: message.retain,
            properties: properties)
        isInPublishCall = false
        lastOut = Self.monotonicSeconds()
        guard status.isSuccess else {
            completion(.failure(publishError(status, topic: message.topic)))
            afterNetworkActivity()
            return
        }
        if let done = publishedDuringCall, done.mid == mid {
            completion(publishOutcome(reasonCode: done.reasonCode, topic: message.topic))
        } else {
            operations[token] = .publish(mid: mid, completion)
            publishTokens[mid] = token
        }
        afterNetworkActivity()
    }

    /// Publishes `messages` in their order, one `mosquitto_publish_v5` after the other in this one turn of the
    /// thread (so they go on the wire in this order; libmosquitto queues those past the maximum in flight, in
    /// order too), and completes with one outcome per message once each has its acknowledgement or has failed.
    /// A message's own failure (an invalid topic or properties, a payload over the broker's limit) leaves the
    /// others going; a lost connection fails the message and every one after it, unsent, with `.disconnected`.
    func publish(
        _ token: UInt64, batch messages: [MQTTOutgoingMessage],
        _ completion: @escaping Completion<[Result<Void, MQTTError>]>
    ) {
        let batch = PublishBatch(count: messages.count, completion)
        for (index, message) in messages.enumerated() {
            guard state == .connected else {
                batch.failOpen(
                    state == .closing || state == .closed
                        ? .closed() : notConnected("the message to \"\(message.topic)\" was not sent"))
                break
            }
            do {
                try MQTTTopic.validatePublish(message.topic)
            } catch {
                batch.settle(index, .failure(error))
                continue
            }
            var properties: PropertyList?
            if protocolVersion == .v5 {
                switch PropertyList.publish(message.properties) {
                case .success(let list): properties = list
                case .failure(let error):
                    batch.settle(index, .failure(error))
                    continue
                }
            }
            isInPublishCall = true
            publishedDuringCall = nil
            let (status, mid) = handle.publish(
                topic: message.topic, payload: message.payload, qos: Int32(message.qos.rawValue),
                retain: message.retain, properties: properties)
            isInPublishCall = false
            guard status.isSuccess else {
                let error = publishError(status, topic: message.topic)
                batch.settle(index, .failure(error))
                if error.code == .disconnected {
                    // Nothing after it is sent: the caller retries from here, in order.
                    for (mid, _) in batch.mids { publishTokens[mid] = nil }
                    batch.failOpen(error)
                    break
                }
                continue
            }
            if let done = publishedDuringCall, done.mid == mid {
                batch.settle(index, publishOutcome(reasonCode: done.reasonCode, topic: message.topic))
            } else {
                batch.mids[mid] = index
                publishTokens[mid] = token
            }
        }
        lastOut = Self.monotonicSeconds()
        if batch.isSettled {
            batch.complete()
        } else {
            operations[token] = .publishBatch(batch)
        }
        if state == .connected { afterNetworkActivity() }
    }

    func subscribe(_ token: UInt64, filter: String, qos: MQTTQoS, _ completion: @escaping Completion<MQTTQoS>) {
        guard state == .connected else {
            completion(.failure(notConnected("cannot subscribe to \"\(filter)\"")))
            return
        }
        let (status, mid) = handle.subscribe(filter: filter, qos: Int32(qos.rawValue))
        lastOut = Self.monotonicSeconds()
        guard status.isSuccess else {
            completion(
                .failure(
                    MQTTError(
                        code: status.rawValue == Int32(MOSQ_ERR_NO_CONN.rawValue) ? .disconnected : .invalidArgument,
                        call: "mosquitto_subscribe_v5", libraryText: status.text,
                        message: "cannot subscribe to \"\(filter)\"")))
            afterNetworkActivity()
            return
        }
        operations[token] = .subscribe(mid: mid, filter: filter, qos: qos, completion)
        subscribeTokens[mid] = token
        afterNetworkActivity()
    }

    /// Stops waiting for `token`'s operation (its task was cancelled). A message already handed to
    /// libmosquitto may still be delivered.
    func cancel(_ token: UInt64) {
        guard let operation = operations.removeValue(forKey: token) else { return }
        let error = MQTTError.cancelled("the broker")
        switch operation {
        case .connect(let completion): completion(.failure(error))
        case .publish(let mid, let completion):
            publishTokens[mid] = nil
            completion(.failure(error))
        case .publishBatch(let batch):
            for (mid, _) in batch.mids { publishTokens[mid] = nil }
            batch.failOpen(error)
            batch.complete()
        case .subscribe(let mid, _, _, let completion):
            subscribeTokens[mid] = nil
            completion(.failure(error))
        case .close(let completion): operations[token] = .close(completion)  // a close runs to its end
        }
    }

    /// Sends DISCONNECT (normal: the broker discards the will) and ends the thread once it is written.
    func close(_ token: UInt64, _ completion: Completion<Void>?) {
        if state == .closed {
            completion?(.success(()))
            return
        }
        if let completion { operations[token] = .close(completion) }
        guard state != .closing else { return }
        let wasOpen = handle.socket >= 0
        state = .closing
        thread.setDeadline(nil)
        failOperations(.closed(), keepingClose: true)
        guard wasOpen else {
            finishClose()
            return
        }
        _ = handle.disconnect()
        if handle.socket < 0 {
            finishClose()
        } else {
            // DISCONNECT could not be written at once: EPOLLOUT finishes it; give up after two seconds.
            afterNetworkActivity()
            thread.setDeadline(ClientThread.now() + 2_000_000_000) { [self] in finishClose() }
        }
    }

    /// Test hook: libmosquitto's socket descriptor (-1 without one).
    var socketDescriptor: Int32 { handle.socket }

    /// Test hook: shuts the socket down without DISCONNECT, as a crash or a cut cable would (the broker then
    /// publishes the will).
    func dropConnection() {
        let fd = handle.socket
        if fd >= 0 { _ = shutdown(fd, Int32(SHUT_RDWR)) }
    }

    // MARK: Connecting

    private func attemptConnection(automatic: Bool) {
        thread.setDeadline(nil)
        state = .connecting(automatic: automatic)
        attemptError = nil
        fallBackToV311 = false
        firstLoggedError = nil
        tlsAnswer = .none
        connectDeadline = nil
        let isV5 = protocolVersion == .v5
        var status = handle.setProtocolVersion(isV5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311)
        if status.isSuccess {
            let properties =
                isV5 ? PropertyList.connect(sessionExpiryInterval: configuration.sessionExpiryInterval) : nil
            status = handle.connect(
                host: configuration.host, port: Int32(clamping: configuration.port),
                keepAlive: configuration.keepAliveSeconds, properties: properties)
        }
        guard status.isSuccess else {
            connectionAttemptFailed(connectError(status, call: "mosquitto_connect_bind_v5"))
            return
        }
        isNewSocket = true
        lastIn = Self.monotonicSeconds()
        lastOut = lastIn
        // `handle.connect` returns once TCP is connected (the TLS handshake and CONNECT follow on the socket).
        connectDeadline = ClientThread.now() + configuration.connectTimeoutNanoseconds
        afterNetworkActivity()
    }

    /// CONNACK has not come within ``MQTTConfiguration/connectTimeout``: ends the attempt now with a `.timeout`
    /// that says what the broker left unanswered, rather than at libmosquitto's keep-alive check (a minute later by
    /// default, and then as an error without the reason). The socket is shut down and read, so that libmosquitto
    /// closes it through its usual path; its on_disconnect then reports `attemptError`.
    private func connectTimedOut() {
        guard case .connecting = state else { return }
        let error = connectTimeoutError()
        attemptError = error
        let before = disconnections
        dropConnection()
        socketReady(clinux_epollin)
        // A shut-down socket reads its end at once, so libmosquitto has given up on it; should it not have, the
        // attempt still ends here (the next `mosquitto_connect` closes the old socket).
        if case .connecting = state, disconnections == before { connectionAttemptFailed(error) }
    }

    private func connectionAttemptFailed(_ error: MQTTError) {
        thread.unwatch()
        guard case .connecting(let automatic) = state else { return }
        connectDeadline = nil
        thread.setDeadline(nil)
        if fallBackToV311, protocolVersion == .v5 {
            // The broker speaks 3.1.1 only: try again at once with it (from the queue, not inside a callback).
            protocolVersion = .v311
            thread.async { [self] in
                if state == .connecting(automatic: automatic) { attemptConnection(automatic: automatic) }
            }
            return
        }
        failConnectOperations(error)
        if hasConnected {
            let delay = scheduleReconnection()
            events.yield(.connectFailed(error, retry: delay))
        } else {
            state = .idle
        }
    }

    /// Schedules the next attempt after the policy's delay, and returns the delay.
    @discardableResult
    private func scheduleReconnection() -> Duration {
        state = .waitingToReconnect
        let delay = configuration.reconnect.delay(beforeAttempt: reconnectAttempt, using: &random)
        reconnectAttempt += 1
        let (seconds, attoseconds) = delay.components
        let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        thread.setDeadline(ClientThread.now() + max(nanoseconds, 0)) { [self] in
            if state == .waitingToReconnect { attemptConnection(automatic: true) }
        }
        return delay
    }

    // MARK: Callbacks (inside mosquitto_* calls, on the thread)

    func handleConnack(code: Int32, flags: Int32) {
        guard case .connecting = state else { return }
        guard code == 0 else {
            attemptError = refusal(code)
            return
        }
        state = .connected
        // The keep-alive is the deadline from now on (set after this read).
        connectDeadline = nil
        thread.setDeadline(nil)
        hasConnected = true
        reconnectAttempt = 0
        sessionPresent = flags & 1 != 0
        if !sessionPresent {
            // The broker has no session (first connection, or it lost it): subscribe again. Their SUBACKs find
            // no waiter and are ignored.
            for subscription in subscriptions {
                _ = handle.subscribe(filter: subscription.filter, qos: Int32(subscription.qos.rawValue))
            }
        }
        let result = MQTTConnectResult(sessionPresent: sessionPresent, protocolVersion: protocolVersion)
        events.yield(.connected(sessionPresent: sessionPresent, protocolVersion: protocolVersion))
        for (token, operation) in operations {
            guard case .connect(let completion) = operation else { continue }
            operations[token] = nil
            completion(.success(result))
        }
    }

    func handleDisconnect(code: Int32) {
        disconnections += 1
        thread.unwatch()
        switch state {
        case .closing:
            finishClose()
        case .connecting:
            connectionAttemptFailed(attemptError ?? connectError(.of(code), call: "mosquitto_loop_read"))
        case .connected:
            thread.setDeadline(nil)
            let error = MQTTError(
                code: .disconnected,
                call: code == Int32(MOSQ_ERR_KEEPALIVE.rawValue) ? "mosquitto_loop_misc" : "mosquitto_loop_read",
                libraryText: libmosquitto_strerror(code),
                message: "lost the connection to broker \(configuration.broker)")
            failOperations(error, keepingClose: true)
            events.yield(.disconnected(error))
            scheduleReconnection()
        case .idle, .waitingToReconnect, .closed:
            break
        }
    }

    func handlePublished(mid: Int32, reasonCode: Int32) {
        guard let token = publishTokens.removeValue(forKey: mid) else {
            if isInPublishCall { publishedDuringCall = (mid, reasonCode) }
            return
        }
        switch operations[token] {
        case .publish(_, let completion)?:
            operations[token] = nil
            completion(publishOutcome(reasonCode: reasonCode, topic: nil))
        case .publishBatch(let batch)?:
            guard let index = batch.mids.removeValue(forKey: mid) else { return }
            batch.settle(index, publishOutcome(reasonCode: reasonCode, topic: nil))
            guard batch.isSettled else { return }
            operations[token] = nil
            batch.complete()
        default:
            operations[token] = nil
        }
    }

    func handleSuback(mid: Int32, granted: Int32?) {
        guard let token = subscribeTokens.removeValue(forKey: mid),
            case .subscribe(_, let filter, let requested, let completion) = operations.removeValue(forKey: token)
        else { return }
        guard let granted, granted < 0x80, let qos = MQTTQoS(rawValue: UInt8(granted)) else {
            let code = granted ?? 0x80
            completion(
                .failure(
                    MQTTError(
                        code: .subscriptionRefused, call: "mosquitto_subscribe_v5",
                        libraryText: protocolVersion == .v5 ? libmosquitto_reason_string(code) : "SUBACK failure 0x80",
                        message: "broker \(configuration.broker) refused the subscription to \"\(filter)\"")))
            return
        }
        if let index = subscriptions.firstIndex(where: { $0.filter == filter }) {
            subscriptions[index].qos = requested
        } else {
            subscriptions.append((filter, requested))
        }
        completion(.success(qos))
    }

    func handleMessage(_ message: MQTTMessage) {
        messages.yield(message)
    }

    func handleLog(_ text: String) {
        if firstLoggedError == nil, case .connecting = state { firstLoggedError = text }
    }

    // MARK: The network loop

    private func socketReady(_ ready: UInt32) {
        let before = disconnections
        if ready & (clinux_epollin | clinux_epollhup | clinux_epollerr) != 0 {
            if configuration.tls != nil, tlsAnswer == .none, case .connecting = state { peekTLSAnswer() }
            lastIn = Self.monotonicSeconds()
            let status = handle.loopRead()
            if !status.isSuccess, disconnections == before {
                // libmosquitto closed the socket without calling on_disconnect (a failed TLS handshake).
                handleDisconnect(code: status.rawValue)
            }
            if disconnections != before { return }
            if !publishTokens.isEmpty { acknowledgeSegmentsAtOnce() }
        }
        // Written after reading too: replies (PUBACK, PUBREL) go out now, and so does CONNECT once a TLS
        // handshake, which only reads advance, has finished.
        if handle.socket >= 0, ready & clinux_epollout != 0 || handle.wantsWrite {
            lastOut = Self.monotonicSeconds()
            let status = handle.loopWrite()
            if !status.isSuccess, disconnections == before { handleDisconnect(code: status.rawValue) }
            if disconnections != before { return }
        }
        afterNetworkActivity()
    }

    /// Notes what the broker sent first in answer to the ClientHello (``TLSAnswer``), leaving it for OpenSSL to read.
    private func peekTLSAnswer() {
        let fd = handle.socket
        guard fd >= 0 else { return }
        var byte: UInt8 = 0
        let count = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        if count == 1 {
            // The TLS record types: change_cipher_spec 20, alert 21, handshake 22, application data 23.
            tlsAnswer = (20...23).contains(byte) ? .tls : .notTLS(byte)
        } else if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            tlsAnswer = .closed
        }
    }

    /// Acknowledges the TCP segments read at once, and the next ones too, rather than up to 40 ms later (Linux's
    /// TCP_QUICKACK, which lapses, hence after each read while acknowledgements are awaited). A broker without
    /// TCP_NODELAY (mosquitto's default) holds each PUBACK after the first of a batch until its previous segment
    /// is acknowledged: with a batch in flight and nothing more to send, a delayed ACK would stall the batch by
    /// 40 ms. With nothing awaited (one publish at a time) the ACK rides on the next packet, as before.
    private func acknowledgeSegmentsAtOnce() {
        let fd = handle.socket
        guard fd >= 0 else { return }
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), Int32(TCP_QUICKACK), &one, socklen_t(MemoryLayout<Int32>.size))
    }

    private func keepAliveDue() {
        guard handle.socket >= 0 else { return }
        let before = disconnections
        let status = handle.loopMisc()
        // loop_misc sent PINGREQ and reset libmosquitto's own times to now (or gave up on a missing PINGRESP).
        lastIn = Self.monotonicSeconds()
        lastOut = lastIn
        if !status.isSuccess, disconnections == before { handleDisconnect(code: status.rawValue) }
        if disconnections != before { return }
        afterNetworkActivity()
    }

    /// Brings the epoll registration and the keep-alive deadline up to date after a libmosquitto call.
    private func afterNetworkActivity() {
        let fd = handle.socket
        guard fd >= 0 else {
            thread.unwatch()
            return
        }
        var interest = clinux_epollin
        // During a TLS handshake libmosquitto wants to write (CONNECT is queued) but cannot until the handshake
        // is done, and the socket is always writable: EPOLLOUT would spin. Reads finish the handshake, and
        // `socketReady` writes after each read.
        let handshaking = configuration.tls != nil && state != .connected
        if handle.wantsWrite, !handshaking || state == .closing { interest |= clinux_epollout }
        thread.watch(fd, events: interest, isNewSocket: isNewSocket) { [unowned self] ready in socketReady(ready) }
        isNewSocket = false
        guard state != .closing else { return }
        if case .connecting = state, let connectDeadline {
            // CONNACK has a bound of its own, shorter than the keep-alive.
            if thread.currentDeadline != connectDeadline {
                thread.setDeadline(connectDeadline) { [unowned self] in connectTimedOut() }
            }
            return
        }
        let dueSecond = min(lastIn, lastOut) + Int64(configuration.keepAliveSeconds)
        let nowSecond = Self.monotonicNanoseconds()
        let deadline = ClientThread.now() + max(dueSecond * 1_000_000_000 - nowSecond, 0)
        // Kept when only a little earlier than it was, to avoid re-arming on every packet.
        if let current = thread.currentDeadline, current <= deadline, deadline - current < 1_000_000_000 { return }
        thread.setDeadline(deadline) { [unowned self] in keepAliveDue() }
    }

    private func finishClose() {
        guard state != .closed else { return }
        state = .closed
        thread.setDeadline(nil)
        thread.unwatch()
        failOperations(.closed(), keepingClose: true)
        messages.finish()
        events.finish()
        for (token, operation) in operations {
            guard case .close(let completion) = operation else { continue }
            operations[token] = nil
            completion(.success(()))
        }
        thread.stop()
    }

    // MARK: Helpers

    private func failOperations(_ error: MQTTError, keepingClose: Bool) {
        for (token, operation) in operations {
            switch operation {
            case .connect(let completion): completion(.failure(error))
            case .publish(_, let completion): completion(.failure(error))
            case .publishBatch(let batch):
                batch.failOpen(error)
                batch.complete()
            case .subscribe(_, _, _, let completion): completion(.failure(error))
            case .close: continue
            }
            operations[token] = nil
        }
        publishTokens.removeAll()
        subscribeTokens.removeAll()
    }

    private func failConnectOperations(_ error: MQTTError) {
        for (token, operation) in operations {
            guard case .connect(let completion) = operation else { continue }
            operations[token] = nil
            completion(.failure(error))
        }
    }

    /// The injected generator as a concrete type (an existential cannot be passed `inout` as `some`).
    private struct ErasedRandom: RandomNumberGenerator {
        var base: any RandomNumberGenerator
        mutating func next() -> UInt64 { base.next() }
    }

    private static func monotonicNanoseconds() -> Int64 {
        clockNanoseconds(CLOCK_MONOTONIC)
    }

    /// As `mosquitto_time()`: whole seconds of CLOCK_MONOTONIC.
    private static func monotonicSeconds() -> Int64 {
        monotonicNanoseconds() / 1_000_000_000
    }
}
