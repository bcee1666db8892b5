public import CoreMetrics
public import MQTT

#if canImport(Glibc)
    import Glibc
#endif

/// Everything the bridge needs besides its devices: fixed for its life.
///
/// The daemon builds the ``mqtt`` part (broker, TLS, credentials) from its configuration file; the bridge
/// replaces the will (status `offline`, retained, at ``qos``), turns clean start off (a persistent session, so
/// commands wait at the broker while the bridge is away) and, when ``MQTTConfiguration/clientID`` is empty,
/// sets the client id to `keepalive-<gateway>` (the host name unless a gateway name is given). Everything else
/// (host, port, TLS, credentials, keep-alive, reconnection policy) is passed through as given.
///
/// ```swift
/// var configuration = BridgeConfiguration(
///     mqtt: MQTTConfiguration(host: "broker.lan", clientID: ""), spoolDirectory: "/var/lib/keepalive/mqtt")
/// configuration.availabilityThreshold = 5
/// ```
public struct BridgeConfiguration: Sendable {
    /// How often the spool forces what it appended to the disk (`fdatasync`). A record is always handed to the
    /// kernel (`write`) before ``MQTTBridge/submit(device:sequence:succeeded:readings:payload:)`` returns, so a
    /// crash of the process (SIGKILL) loses nothing under any policy; the policy only decides what a crash of
    /// the machine (power loss, kernel panic) may lose.
    public enum SyncPolicy: Sendable, Hashable {
        /// `fdatasync` after every record: nothing acknowledged to the caller is lost, even on power loss.
        case everyRecord
        /// `fdatasync` after every `n`th record: a power loss loses at most the last `n - 1` records.
        case everyRecords(Int)
        /// Never (the kernel writes back within ~30 s): for tmpfs or tests.
        case never
    }

    public var mqtt: MQTTConfiguration
    /// The first topic level, `keepalive` by default.
    public var topicPrefix: String
    /// The second topic level and the Home Assistant node id; the host name by default.
    public var gateway: String
    /// QoS of state records and retained topics; 1 (at least once) by default.
    public var qos: MQTTQoS
    /// Home Assistant MQTT discovery on (the default) or off.
    public var discovery: Bool
    /// `homeassistant` by default; HA's own `discovery_prefix`.
    public var discoveryPrefix: String
    /// Where the spool's segments, its acknowledged position and the discovery state file live (created 0700
    /// when missing).
    public var spoolDirectory: String
    /// The spool's bound in bytes (16 MiB by default); beyond it the oldest records are dropped and counted.
    public var spoolLimitBytes: Int
    public var syncPolicy: SyncPolicy
    /// Consecutive failed polls after which a device is announced `offline` (3 by default).
    public var availabilityThreshold: Int
    /// Home Assistant's `expire_after` is this many effective intervals (3 by default).
    public var expireAfterMultiplier: Int
    /// Longest command payload accepted (64 bytes by default); longer ones are answered on the error topic.
    public var maximumCommandBytes: Int
    /// How long a graceful shutdown may go on delivering what is still spooled while the broker is connected, before
    /// `offline` and the close (3 s by default); what is left stays in the spool for the next start. A broker that
    /// is away ends the wait at once.
    public var shutdownDrainBound: Duration = .seconds(3)
    /// Where the bridge reports how long records take from the spool to the broker's acknowledgement
    /// (`keepalive_mqtt_delivery_seconds`); swift-metrics' global factory by default.
    public var metricsFactory: any MetricsFactory = MetricsSystem.factory

    public init(
        mqtt: MQTTConfiguration, topicPrefix: String = "keepalive", gateway: String? = nil,
        qos: MQTTQoS = .atLeastOnce, discovery: Bool = true, discoveryPrefix: String = "homeassistant",
        spoolDirectory: String, spoolLimitBytes: Int = 16 << 20, syncPolicy: SyncPolicy = .everyRecord,
        availabilityThreshold: Int = 3, expireAfterMultiplier: Int = 3, maximumCommandBytes: Int = 64
    ) {
        let gateway = gateway ?? BridgeConfiguration.hostName()
        self.mqtt = mqtt
        if self.mqtt.clientID.isEmpty { self.mqtt.clientID = "keepalive-" + gateway }
        self.topicPrefix = topicPrefix
        self.gateway = gateway
        self.qos = qos
        self.discovery = discovery
        self.discoveryPrefix = discoveryPrefix
        self.spoolDirectory = spoolDirectory
        self.spoolLimitBytes = spoolLimitBytes
        self.syncPolicy = syncPolicy
        self.availabilityThreshold = availabilityThreshold
        self.expireAfterMultiplier = expireAfterMultiplier
        self.maximumCommandBytes = maximumCommandBytes
    }

    /// This machine's host name (`gethostname`), `keepalive` when it has none.
    public static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "keepalive" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "keepalive" : name
    }
}
