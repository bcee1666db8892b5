import KeepAlive
/// Who decides, right before each poll, whether this engine may poll a device now: for a device shared by
/// several gateways (the daemon's fleet), only the gateway holding its lease may, and only while the lease's
/// fence allows a whole poll. A ``PollEngine`` without one polls every device on every tick.
///
/// A declined tick writes no record (the device is another gateway's to poll); a poll on command is refused with
/// ``PollEngine/CommandError/Code/notHeld``.
public protocol PollAdmission: Sendable {
    /// Asked at the start of every poll (scheduled or on command), before any radio work: `.poll` with what the
    /// record should say about the holder, or `.decline`. Must return at once (no I/O).
    func admit(_ device: String) -> PollAdmissionDecision

    /// Whether a tick the scheduler skipped (overlap, backoff, ledger closed) is this engine's to record: true
    /// for devices it does not share, and for shared ones while it holds them.
    func records(_ device: String) -> Bool
}

public enum PollAdmissionDecision: Sendable, Hashable {
    /// Poll; the record carries `holder` when the device is shared (nil: not shared, polled as always).
    case poll(PollRecord.Holder?)
    /// Not this engine's poll: no radio work, no record.
    case decline
    /// Paused by its operator (`keepalive pause`): no radio work and no record, as a decline; a poll on command
    /// is refused with ``PollEngine/CommandError/Code/paused``.
    case paused
}

extension PollRecord {
    /// Which gateway polled a shared device, on which adapter, and how it came to hold it.
    public struct Holder: Sendable, Hashable {
        /// How the device came to this holder: on the first poll after a handover only.
        public struct Handover: Sendable, Hashable {
            /// The previous holder, when known.
            public var from: String?
            /// `expired`, `released` or `will` (see docs/FLEET.md).
            public var reason: String

            public init(from: String?, reason: String) {
                self.from = from
                self.reason = reason
            }
        }

        /// The gateway that polled.
        public var gateway: String
        /// The adapter the poll went through (the fleet may move a device to a better adapter of the gateway).
        public var adapter: String
        public var handover: Handover?

        public init(gateway: String, adapter: String, handover: Handover? = nil) {
            self.gateway = gateway
            self.adapter = adapter
            self.handover = handover
        }
    }
}
