/// One exported metric family: its name, type, unit and help, and a histogram's buckets. The one table of them is
/// ``MetricFamily/table``: every family the daemon exports has a row there, so each has HELP and TYPE, counters
/// end in `_total`, and a unit is in the name (seconds, bytes).
public struct MetricFamily: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        case counter, gauge, histogram
    }

    /// Without `_total` for a counter (OpenMetrics' family name; the samples and Prometheus 0.0.4 add it).
    public let name: String
    public let kind: Kind
    /// The unit the name ends with (`seconds`, `bytes`), for OpenMetrics' `# UNIT`; nil for a count.
    public let unit: String?
    public let help: String
    /// A histogram's upper bounds, ascending, in the family's unit; `+Inf` is added when rendered.
    public let buckets: [Double]

    init(_ name: String, _ kind: Kind, unit: String? = nil, buckets: [Double] = [], _ help: String) {
        self.name = name
        self.kind = kind
        self.unit = unit
        self.help = help
        self.buckets = buckets
    }

    /// The name a family's samples carry in Prometheus 0.0.4's `# TYPE` and `# HELP`.
    var prometheusName: String { kind == .counter ? name + "_total" : name }

    /// Bounds for a BLE operation's latency: a read takes tens of milliseconds, a connect about a second, a
    /// disconnect about two (bluetoothd's timer), a connect that times out ten.
    static let latencyBuckets: [Double] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
    /// Bounds for waits that are often none: a slot, a PUBACK.
    static let waitBuckets: [Double] = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60]

    /// Every family, by name (without `_total`).
    public static let table: [String: MetricFamily] = Dictionary(
        uniqueKeysWithValues: all.map { ($0.name, $0) })

    /// In the order they are rendered.
    public static let all: [MetricFamily] = [
        MetricFamily(
            "keepalive_build_info", .gauge,
            "Always 1: the daemon's version as a label."),
        MetricFamily(
            "keepalive_polls", .counter,
            "Poll records written, by device, result (newData, noData, failed) and failure code."),
        MetricFamily(
            "keepalive_failures_in_a_row", .gauge,
            """
            Failed records of the device since its last successful one (a poll that found no free connection slot, \
            or a gated poll that did not hear the device, leaves it as it is).
            """),
        MetricFamily(
            "keepalive_advertisements_heard", .counter,
            "Advertisements heard of a listened-to device, as its records report them."),
        MetricFamily(
            "keepalive_window_used_seconds", .histogram, unit: "seconds", buckets: latencyBuckets,
            "How much of its background task window a poll used, by adapter."),
        MetricFamily(
            "keepalive_slot_wait_seconds", .histogram, unit: "seconds", buckets: waitBuckets,
            "How long a poll waited for a connection slot on its adapter."),
        MetricFamily(
            "keepalive_link_seconds", .histogram, unit: "seconds", buckets: latencyBuckets,
            "How long a poll's links were up, from the Bluetooth stack's own Connected signals, by adapter."),
        MetricFamily(
            "keepalive_poll_phase_seconds", .histogram, unit: "seconds", buckets: latencyBuckets,
            """
            Latency of each successful step of a poll, by adapter and phase (connect, service_resolution, write, \
            read, subscribe, disconnect).
            """),
        MetricFamily(
            "keepalive_adapter_healthy", .gauge,
            "1 while the adapter is healthy, 0 once the healing ladder has given up on it."),
        MetricFamily(
            "keepalive_healing_actions", .counter,
            "Steps the healing ladder took, by adapter and action."),
        MetricFamily(
            "keepalive_spool_records", .gauge,
            "Records in the MQTT spool not yet acknowledged by the broker."),
        MetricFamily(
            "keepalive_spool_bytes", .gauge, unit: "bytes",
            "Bytes the MQTT spool's segments take on disk."),
        MetricFamily(
            "keepalive_spool_oldest_age_seconds", .gauge, unit: "seconds",
            """
            Age of the oldest record in the MQTT spool not yet acknowledged (records found on disk at start count \
            from the start); 0 when none waits.
            """),
        MetricFamily(
            "keepalive_mqtt_delivered", .counter,
            "Records the MQTT broker acknowledged."),
        MetricFamily(
            "keepalive_mqtt_dropped", .counter,
            "Records lost before delivery: the spool was full, damaged or could not be written."),
        MetricFamily(
            "keepalive_mqtt_connected", .gauge,
            "1 while the bridge is connected to the MQTT broker."),
        MetricFamily(
            "keepalive_mqtt_delivery_seconds", .histogram, unit: "seconds", buckets: waitBuckets,
            "From a record's spooling to the broker's acknowledgement (records spooled by this process)."),
        MetricFamily(
            "keepalive_fleet_held_devices", .gauge,
            "Shared devices this gateway holds now."),
        MetricFamily(
            "keepalive_fleet_holds", .counter,
            "Holds of a shared device this gateway started, by how (claim or handover reason)."),
        MetricFamily(
            "keepalive_fleet_releases", .counter,
            "Holds of a shared device this gateway ended, by why (released, claimed, fenced)."),
    ]

    /// A family for a label no row has (a library of the app's own reporting through the same factory): a name
    /// made valid, with a HELP that says where it came from.
    static func unlisted(_ label: String, kind: Kind) -> MetricFamily {
        var name = String(
            label.unicodeScalars.map { scalar -> Character in
                switch scalar {
                case "a"..."z", "A"..."Z", "0"..."9", "_", ":": Character(scalar)
                default: "_"
                }
            })
        if name.first.map({ $0.isNumber }) ?? true { name = "_" + name }
        if kind == .counter, name.hasSuffix("_total") { name.removeLast("_total".count) }
        let isTime = kind == .histogram && name.hasSuffix("_seconds")
        return MetricFamily(
            name, kind, unit: isTime ? "seconds" : nil, buckets: isTime ? latencyBuckets : waitBuckets,
            "Reported through swift-metrics as \(label).")
    }
}
