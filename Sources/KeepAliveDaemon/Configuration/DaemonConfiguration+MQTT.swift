/// The `mqtt:` section: where the bridge publishes and how. Absent: no bridge, JSON Lines only.
extension DaemonConfiguration {
    public struct MQTT: Sendable, Hashable {
        public enum Scheme: String, Sendable, Hashable {
            /// `mqtt://`: plain TCP (port 1883 by default).
            case plain = "mqtt"
            /// `mqtts://`: TLS (port 8883 by default), the broker's certificate and host name verified.
            case tls = "mqtts"
        }

        public var scheme: Scheme
        public var host: String
        public var port: Int
        /// Stable across restarts, so the broker keeps the session (default `keepalive-<hostname>`).
        public var clientID: String?
        public var username: String?
        /// A file holding the password (its first line); never the password itself in the configuration.
        public var passwordFile: String?
        /// A PEM file of CAs to trust instead of the system store, and a client certificate with its key.
        public var caFile: String?
        public var certificateFile: String?
        public var keyFile: String?
        /// The first level of every topic (default `keepalive`).
        public var topicPrefix: String
        /// This gateway's name, the second level (default the host name).
        public var gateway: String?
        /// QoS of state and availability publishes (default 1).
        public var qos: Int
        /// Home Assistant MQTT discovery on/off (default on) and its prefix (default `homeassistant`).
        public var discovery: Bool
        public var discoveryPrefix: String
        /// Where records wait while the broker is away, and how much of them (default 16 MiB).
        public var spoolPath: String?
        public var spoolSize: Int
        /// Consecutive failed ticks before a device's availability turns `offline` (default 3).
        public var offlineAfter: Int
        /// Where the section starts, for messages about it.
        public var location: SourceLocation?

        public init(
            scheme: Scheme = .plain, host: String, port: Int? = nil, clientID: String? = nil, username: String? = nil,
            passwordFile: String? = nil, caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil,
            topicPrefix: String = "keepalive", gateway: String? = nil, qos: Int = 1, discovery: Bool = true,
            discoveryPrefix: String = "homeassistant", spoolPath: String? = nil, spoolSize: Int = 16 << 20,
            offlineAfter: Int = 3, location: SourceLocation? = nil
        ) {
            self.scheme = scheme
            self.host = host
            self.port = port ?? (scheme == .tls ? 8883 : 1883)
            self.clientID = clientID
            self.username = username
            self.passwordFile = passwordFile
            self.caFile = caFile
            self.certificateFile = certificateFile
            self.keyFile = keyFile
            self.topicPrefix = topicPrefix
            self.gateway = gateway
            self.qos = qos
            self.discovery = discovery
            self.discoveryPrefix = discoveryPrefix
            self.spoolPath = spoolPath
            self.spoolSize = spoolSize
            self.offlineAfter = offlineAfter
            self.location = location
        }

        /// `mqtt://host:1883`, as messages name the broker.
        public var brokerDescription: String {
            "\(scheme.rawValue)://\(host.contains(":") ? "[\(host)]" : host):\(port)"
        }
    }
}
