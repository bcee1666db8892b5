/// What the state machine asks the binding to do, in order.
public enum FleetEffect: Equatable, Sendable {
    /// Publish with QoS 1 on the one connection (so the broker gets them in this order).
    case publish(topic: String, payload: [UInt8], retained: Bool)
    case subscribe(filter: String)
    /// Fire ``FleetEvent/timerFired(_:)`` at (or after) this instant; replaces the timer's previous deadline.
    case armTimer(FleetTimer, at: FleetInstant)
    /// This gateway now holds `device`: poll it on `adapter`, never starting a poll that could end after `until`.
    case holdStarted(device: String, adapter: String, until: FleetInstant, handover: Handover?)
    /// A renewal came back accepted: the hold now runs until `until`.
    case holdExtended(device: String, until: FleetInstant)
    /// Keep holding, on another adapter of this gateway (the same hysteresis rule decided it).
    case adapterChanged(device: String, adapter: String)
    /// Stop polling `device` now.
    case holdEnded(device: String, reason: HoldEndReason)
    case diagnostic(FleetDiagnostic)
}

/// How a device came to this gateway: written into the first record after a handover.
public struct Handover: Equatable, Sendable {
    public enum Reason: String, Sendable {
        /// The previous holder stopped renewing and its lease ran out.
        case expired
        /// The previous holder gave the device up (a placement move, or it was stopping).
        case released
        /// The previous holder's last will said it went offline, and its lease then ran out.
        case will
    }

    /// The previous holder, when known (it is not after a broker restart that lost the retained lease).
    public var from: String?
    public var reason: Reason

    public init(from: String?, reason: Reason) {
        self.from = from
        self.reason = reason
    }
}

public enum HoldEndReason: Equatable, Sendable {
    /// No accepted renewal in time: the holder's own clock says the others may soon claim.
    case fenced
    /// Another gateway's claim was accepted (only possible after this hold's fence, or after a release).
    case claimedBy(String)
    /// This gateway handed the device over (placement), to this successor if any.
    case released(to: String?)
}

/// Things worth a log line; none of them stops the state machine.
public enum FleetDiagnostic: Equatable, Sendable {
    case malformed(topic: String, FleetDecodingError)
    case unknownTopic(String)
    case unknownDevice(String)
    /// A report's or a status's gateway field disagrees with its topic.
    case mismatchedGateway(topic: String)
    case ownMessageRejected(device: String, kind: LeaseMessage.Kind)
    case echoTimedOut(device: String, kind: LeaseMessage.Kind)
}

/// Permission for one poll: what the record of that poll says about who polled and how it got the device.
public struct PollPermit: Equatable, Sendable {
    public var device: String
    /// This gateway's name: the record's `holder` field.
    public var holder: String
    public var adapter: String
    /// Set on the first poll after this gateway took the device: the record's `handover` field.
    public var handover: Handover?
}
