import KeepAlive
import Basics
import Logging
import MQTTBridge

/// The MQTT bridge as a record sink: each record into its crash-safe spool (the bridge publishes from there on
/// its own connection's thread); an interval that changed (low power, a command) re-announces the device's
/// `expire_after`. A record the spool cannot take is logged, and the output goes on.
final class MQTTRecordSink: RecordSink {
    private let bridge: MQTTBridge
    private let logger: Logger
    /// The last interval seen per device.
    private let intervals: Locked<[String: Duration]>

    init(_ bridge: MQTTBridge, configuration: DaemonConfiguration, logger: Logger) {
        self.bridge = bridge
        self.logger = logger
        let initial = configuration.devices.map { ($0.name, $0.interval ?? configuration.interval) }
        self.intervals = Locked(Dictionary(initial) { first, _ in first })
    }

    /// The spool may `fdatasync` each record.
    var neverBlocks: Bool { false }

    func accept(_ sequenced: SequencedRecord) {
        let record = sequenced.record
        do {
            try bridge.submit(
                device: record.device, sequence: sequenced.sequence, succeeded: record.result != .failed,
                readings: record.readings, payload: Array(sequenced.line.utf8)
            )
        } catch {
            logger.error(
                "a record could not be spooled for MQTT",
                metadata: ["device": "\(record.device)", "seq": "\(sequenced.sequence)", "error": "\(error)"]
            )
        }
        let changed = intervals.withLock { last in
            defer { last[record.device] = record.interval }
            return last[record.device].map { $0 != record.interval } ?? false
        }
        if changed { bridge.intervalChanged(device: record.device, to: record.interval) }
    }
}
