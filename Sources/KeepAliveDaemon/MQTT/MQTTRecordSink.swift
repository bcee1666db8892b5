import KeepAlive
import Basics
import Logging
import MQTTBridge

#if canImport(Glibc)
    import Glibc
#endif

/// The MQTT bridge as a record sink: each record into its crash-safe spool (the bridge publishes from there on
/// its own connection's thread); an interval that changed (low power, a command) re-announces the device's
/// `expire_after`. A record the spool cannot take (a full disk) is lost, counted on `dropped`, and the output goes
/// on: the loss is reported once when it begins and once when the spool writes again (``SinkTrouble``), and said
/// in `STATUS=` and `health` meanwhile.
final class MQTTRecordSink: RecordSink {
    private let bridge: MQTTBridge
    private let logger: Logger
    private let trouble = Locked(SinkTrouble())
    private let reporter: SinkTrouble.Reporter
    /// The last interval seen per device.
    private let intervals: Locked<[String: Duration]>

    init(
        _ bridge: MQTTBridge, configuration: DaemonConfiguration, status: StatusBoard, notifier: SystemdNotifier?,
        logger: Logger
    ) {
        self.bridge = bridge
        self.logger = logger
        reporter = SinkTrouble.Reporter(sink: "the MQTT spool", status: status, notifier: notifier, logger: logger)
        let initial = configuration.devices.map { ($0.name, $0.interval ?? configuration.interval) }
        self.intervals = Locked(Dictionary(initial) { first, _ in first })
    }

    /// The spool may `fdatasync` each record.
    var neverBlocks: Bool { false }

    func accept(_ sequenced: SequencedRecord) {
        let record = sequenced.record
        var event: SinkTrouble.Event?
        do {
            try bridge.submit(
                device: record.device, sequence: sequenced.sequence,
                // Contention and a gated poll's silence say nothing of the device; a passive sensor's does.
                succeeded: record.isContention || (record.isNotHeard && record.source == .connection)
                    || record.source == .history
                    ? nil : record.result != .failed,
                readings: record.readings,
                // A passive sensor's record: a new packet is newData; anything else repeats the last one, whose
                // events (a button press) were published already.
                advertisement: record.source == .advertisement
                    ? BridgeAdvertisement(packetID: record.heard?.packetID, isRepeat: record.result != .newData) : nil,
                history: record.source == .history,
                payload: Array(sequenced.line.utf8)
            )
            // One lock per record; the clock only when a failure ends.
            event = trouble.withLock {
                $0.isFailing ? $0.wrote(at: .nanoseconds(clockNanoseconds(CLOCK_MONOTONIC))) : nil
            }
        } catch  where error.recordLost {
            let reason = error.errno.map { String(cString: strerror($0)) } ?? error.message
            event = trouble.withLock {
                $0.failed(
                    sequence: sequenced.sequence, reason: reason, at: .nanoseconds(clockNanoseconds(CLOCK_MONOTONIC)))
            }
        } catch {
            // Written, but a sync or tidying after it failed: it may still be delivered.
            logger.error(
                "a spool operation failed after a record was written; it may still be delivered",
                metadata: ["device": "\(record.device)", "seq": "\(sequenced.sequence)", "error": "\(error)"]
            )
        }
        if let event { reporter.report(event) }
        let changed = intervals.withLock { last in
            defer { last[record.device] = record.interval }
            return last[record.device].map { $0 != record.interval } ?? false
        }
        if changed { bridge.intervalChanged(device: record.device, to: record.interval) }
    }
}
