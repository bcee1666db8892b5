/// The one error type of the `MQTT` module.
///
/// Every failure names the libmosquitto call that reported it (`call`, e.g. `mosquitto_connect_bind_v5`) and
/// keeps mosquitto's own text for the code it returned (`mosquitto_strerror`, `mosquitto_connack_string`,
/// `mosquitto_reason_string`), so a log line says both what this module tried and what the library or broker
/// answered. A password never appears in any of it.
///
/// ```swift
/// do {
///     try await client.connect()
/// } catch let error where error.code == .notAuthorized {
///     print(error)  // MQTTError.notAuthorized(broker 127.0.0.1:1883 refused user "bridge": ...)
/// }
/// ```
public struct MQTTError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, as an extensible set of codes (new codes are not a breaking change).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case connectionRefused, notAuthorized, tls, protocolError, disconnected, timeout, cancelled
            case invalidTopic, invalidArgument, systemCall, subscriptionRefused, publishRefused, closed
            case libraryUnavailable
        }

        private var base: Base
        private init(_ base: Base) { self.base = base }

        /// The broker could not be reached (TCP refused, name not found) or refused the CONNECT for a reason
        /// other than authorisation (identifier rejected, server unavailable, protocol version).
        public static let connectionRefused = Code(.connectionRefused)
        /// The broker refused the credentials (bad user name or password, not authorised).
        public static let notAuthorized = Code(.notAuthorized)
        /// The TLS handshake failed: the broker's certificate did not verify against the configured CA or host
        /// name, a certificate or key file could not be loaded, or the port does not speak TLS at all (the message
        /// says which).
        public static let tls = Code(.tls)
        /// The broker or the library broke the protocol (a malformed packet, a keep-alive timeout counted here
        /// too is `disconnected`).
        public static let protocolError = Code(.protocolError)
        /// The connection was lost (or never up) while the operation needed it; publishes in flight fail with it.
        public static let disconnected = Code(.disconnected)
        /// An operation did not complete in its time (a broker that took the connection and left CONNECT
        /// unanswered).
        public static let timeout = Code(.timeout)
        /// The waiting task was cancelled.
        public static let cancelled = Code(.cancelled)
        /// A topic or topic filter is not valid MQTT; nothing was sent. The message names the topic.
        public static let invalidTopic = Code(.invalidTopic)
        /// A configuration value or argument was rejected (by this module or by libmosquitto).
        public static let invalidArgument = Code(.invalidArgument)
        /// A system call failed (epoll, eventfd, a thread, reading a file); the message names it and `errno`.
        public static let systemCall = Code(.systemCall)
        /// The broker answered SUBACK with a failure (0x80 or an MQTT 5 reason code ≥ 0x80).
        public static let subscriptionRefused = Code(.subscriptionRefused)
        /// The broker answered PUBACK/PUBREC with an MQTT 5 reason code ≥ 0x80 (e.g. not authorised).
        public static let publishRefused = Code(.publishRefused)
        /// The client was closed.
        public static let closed = Code(.closed)
        /// libmosquitto (`libmosquitto.so.1`, Debian's libmosquitto1) could not be loaded, or lacks a function
        /// this module needs (it needs 2.0 or later).
        public static let libraryUnavailable = Code(.libraryUnavailable)

        public var description: String {
            switch base {
            case .connectionRefused: "connectionRefused"
            case .notAuthorized: "notAuthorized"
            case .tls: "tls"
            case .protocolError: "protocolError"
            case .disconnected: "disconnected"
            case .timeout: "timeout"
            case .cancelled: "cancelled"
            case .invalidTopic: "invalidTopic"
            case .invalidArgument: "invalidArgument"
            case .systemCall: "systemCall"
            case .subscriptionRefused: "subscriptionRefused"
            case .publishRefused: "publishRefused"
            case .closed: "closed"
            case .libraryUnavailable: "libraryUnavailable"
            }
        }
    }

    /// What kind of failure this is.
    public var code: Code
    /// The libmosquitto (or system) call that failed, e.g. `mosquitto_publish_v5`; nil for checks made here.
    public var call: String?
    /// mosquitto's own text for the failure (`mosquitto_strerror`, `mosquitto_connack_string`,
    /// `mosquitto_reason_string`), or OpenSSL's last error line for a TLS failure.
    public var libraryText: String?
    /// What this module was doing, naming the broker (`host:port`), the user or the topic involved.
    public var message: String

    public init(code: Code, call: String? = nil, libraryText: String? = nil, message: String) {
        self.code = code
        self.call = call
        self.libraryText = libraryText
        self.message = message
    }

    public var description: String {
        var text = "MQTTError.\(code)(\(message)"
        if let call { text += "; \(call)" }
        if let libraryText { text += ": \(libraryText)" }
        return text + ")"
    }
}

extension MQTTError {
    static func closed() -> MQTTError {
        MQTTError(code: .closed, message: "the MQTT client is closed")
    }

    static func cancelled(_ what: String) -> MQTTError {
        MQTTError(code: .cancelled, message: "cancelled while waiting for \(what)")
    }
}
