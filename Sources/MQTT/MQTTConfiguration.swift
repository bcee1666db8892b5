/// Everything an ``MQTTClient`` needs to reach its broker: fixed for the client's life.
///
/// The defaults are those of a daemon publishing readings: a persistent session (clean start off) kept by the
/// broker for a day, MQTT 5 with a fall back to 3.1.1, a 60 s keep-alive, TLS off.
public struct MQTTConfiguration: Sendable {
    /// The last will: published by the broker when the connection ends without a normal DISCONNECT.
    public struct Will: Sendable, Hashable {
        public var topic: String
        public var payload: [UInt8]
        public var qos: MQTTQoS
        public var retain: Bool

        public init(topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = true) {
            self.topic = topic
            self.payload = payload
            self.qos = qos
            self.retain = retain
        }
    }

    /// A user name and its password (read from a file with ``MQTTClient/readPassword(from:)``). The password
    /// is never printed: `description`, `debugDescription` and the mirror (`dump`) show the user only.
    public struct Credentials: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
        CustomReflectable
    {
        public var user: String
        public var password: String?

        public init(user: String, password: String?) {
            self.user = user
            self.password = password
        }

        public var description: String {
            "Credentials(user: \"\(user)\", password: \(password == nil ? "none" : "<hidden>"))"
        }
        public var debugDescription: String { description }
        public var customMirror: Mirror {
            Mirror(self, children: ["user": user, "password": password == nil ? "none" : "<hidden>"])
        }
    }

    /// TLS settings. Verification of the broker's certificate chain *and* host name is always on.
    public struct TLS: Sendable, Hashable {
        /// A PEM file of trusted CA certificates; nil uses `caDirectory`.
        public var caFile: String?
        /// A directory of hashed CA certificates (`c_rehash`); the system store by default.
        public var caDirectory: String?
        /// A PEM client certificate and its key, for brokers that authenticate clients by certificate.
        public var certificateFile: String?
        public var keyFile: String?

        /// Trust the system's CA store (/etc/ssl/certs).
        public static let systemTrustStore = TLS(caFile: nil, caDirectory: "/etc/ssl/certs")

        public init(
            caFile: String? = nil, caDirectory: String? = nil, certificateFile: String? = nil, keyFile: String? = nil
        ) {
            self.caFile = caFile
            self.caDirectory = caFile == nil && caDirectory == nil ? "/etc/ssl/certs" : caDirectory
            self.certificateFile = certificateFile
            self.keyFile = keyFile
        }
    }

    public var host: String
    public var port: Int
    /// Stable across restarts, so that the broker finds the persistent session again.
    public var clientID: String
    /// Whole seconds, at least 5 (libmosquitto's minimum).
    public var keepAlive: Duration
    /// How long a broker that took the TCP connection has to answer CONNECT (and, with TLS, the handshake before
    /// it) before the attempt is given up and reported as `.timeout`. Its own bound, not the keep-alive: a
    /// listener that accepts and never answers (a wedged broker, the wrong service on the port) would otherwise
    /// go unreported for a whole keep-alive, a minute by default. A broker that answers at all does so in
    /// milliseconds; the bound is for one that does not.
    public var connectTimeout: Duration
    /// False (the default): MQTT 3.1.1 clean session off / MQTT 5 clean start off, so the broker keeps the
    /// subscriptions and queued QoS 1/2 messages while the client is away.
    public var cleanStart: Bool
    /// MQTT 5: how long (seconds) the broker keeps the session after the connection ends. 3.1.1 has no such
    /// setting (the broker keeps it per its own configuration).
    public var sessionExpiryInterval: UInt32
    /// Try MQTT 5 first, and 3.1.1 when the broker refuses it; `.v311` goes straight to 3.1.1.
    public var protocolVersion: MQTTProtocolVersion
    public var will: Will?
    public var credentials: Credentials?
    public var tls: TLS?
    /// QoS 1/2 publishes in flight at once (more wait in libmosquitto's queue, in order).
    public var maximumInflight: Int
    public var reconnect: MQTTReconnectPolicy
    /// Names the client's thread (at most 15 bytes shown by top -H).
    public var threadName: String

    public init(
        host: String, port: Int = 1883, clientID: String, keepAlive: Duration = .seconds(60),
        connectTimeout: Duration = .seconds(5), cleanStart: Bool = false,
        sessionExpiryInterval: UInt32 = 86_400, protocolVersion: MQTTProtocolVersion = .v5, will: Will? = nil,
        credentials: Credentials? = nil, tls: TLS? = nil, maximumInflight: Int = 100,
        reconnect: MQTTReconnectPolicy = MQTTReconnectPolicy(), threadName: String = "mqtt"
    ) {
        self.host = host
        self.port = port
        self.clientID = clientID
        self.keepAlive = keepAlive
        self.connectTimeout = connectTimeout
        self.cleanStart = cleanStart
        self.sessionExpiryInterval = sessionExpiryInterval
        self.protocolVersion = protocolVersion
        self.will = will
        self.credentials = credentials
        self.tls = tls
        self.maximumInflight = maximumInflight
        self.reconnect = reconnect
        self.threadName = threadName
    }

    /// `host:port`, as errors name the broker.
    public var broker: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    var keepAliveSeconds: Int32 {
        Int32(clamping: max(keepAlive.components.seconds, 5))
    }

    /// ``connectTimeout`` in nanoseconds, at least a millisecond (a zero bound would fail every attempt) and at most
    /// a day (far past any use, and the arithmetic stays far from overflowing).
    var connectTimeoutNanoseconds: Int64 {
        let (seconds, attoseconds) = connectTimeout.components
        let nanoseconds = min(max(seconds, 0), 86_400) * 1_000_000_000 + attoseconds / 1_000_000_000
        return min(max(nanoseconds, 1_000_000), 86_400 * 1_000_000_000)
    }

    /// ``connectTimeout`` as the configuration file writes durations (`5s`, `1500ms`), for messages. The package's
    /// `Duration.compact` lives in the KeepAlive module, which this one does not depend on; a configured bound is
    /// whole milliseconds in practice.
    var connectTimeoutText: String {
        let milliseconds = connectTimeoutNanoseconds / 1_000_000
        return milliseconds % 1_000 == 0 ? "\(milliseconds / 1_000)s" : "\(milliseconds)ms"
    }
}
