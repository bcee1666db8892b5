/// One gateway's view of one device's lease topic: the deterministic rule every gateway applies, in the broker's
/// order, to every message of that topic (its own included).
///
/// The rule is compare-and-swap on the topic's last message: a message is *accepted* exactly when its `previous`
/// names the message immediately before it in the topic's order (accepted or not), or nil when there was none.
/// Every message — accepted, rejected or retained — becomes the new "last". Because the broker gives every
/// subscriber one order per topic, and a new subscriber gets the last message as the retained one, all gateways
/// that see the same suffix of the topic agree on which messages were accepted.
public struct LeaseView: Sendable {
    /// What the accepted messages say, as far as this gateway knows.
    public enum State: Equatable, Sendable {
        /// Nothing accepted seen since (re)connecting: someone may hold the device; wait a whole lease.
        case unknown
        case held(gateway: String, incarnation: UInt64)
        case released(gateway: String, successor: String?)
    }

    public enum Outcome: Equatable, Sendable {
        case accepted
        case rejected
        /// The same message again (a retained copy after resubscribing): ignored entirely.
        case duplicate
    }

    /// The last message of the topic, accepted or not; nil when none has been seen since connecting.
    public private(set) var last: FleetMessageID?
    /// When this gateway received `last`, or connected if it has received nothing since: the instant a claimant
    /// waits a lease from.
    public private(set) var basis: FleetInstant
    public private(set) var state: State = .unknown
    /// Who last asserted holding (claim or renew), accepted or taken from a retained message: for records only.
    public private(set) var presumedHolder: String?
    /// The longest lease any message of this topic has asked for since connecting: a claimant waits at least this.
    public private(set) var longestLeaseNanoseconds: Int64
    /// True from a (re)connect until the first message. A retained message may have been rejected by those who saw
    /// its predecessor, so it is taken as "last" but not as the truth about the holder. A *live* message naming no
    /// predecessor, received while nothing (not even a retained message) came before it, is the topic's first
    /// message in the broker's current life, so it is accepted — that is how a device is first claimed.
    private var synchronizing = true

    public init(connectedAt now: FleetInstant, leaseNanoseconds: Int64) {
        basis = now
        longestLeaseNanoseconds = leaseNanoseconds
    }

    /// Forgets what the previous connection showed: after a reconnect the broker's retained message is the only
    /// truth (and after a broker restart without persistence, there is none).
    public mutating func reconnect(at now: FleetInstant, leaseNanoseconds: Int64) {
        self = LeaseView(connectedAt: now, leaseNanoseconds: leaseNanoseconds)
    }

    /// Applies the next message of the topic in the broker's order. `retained` is the RETAIN flag of the delivery
    /// (set by the broker only for the copy it sends because of a new subscription, MQTT 3.1.1 §3.3.1.3).
    public mutating func apply(_ message: LeaseMessage, retained: Bool, receivedAt now: FleetInstant) -> Outcome {
        if message.id == last { return .duplicate }
        let accepted =
            synchronizing
            ? (!retained && message.previous == nil)
            : message.previous == last
        last = message.id
        basis = now
        longestLeaseNanoseconds = max(longestLeaseNanoseconds, message.leaseNanoseconds)
        if message.kind != .release { presumedHolder = message.id.gateway }
        let wasSynchronizing = synchronizing
        synchronizing = false
        guard accepted else {
            // A first message after reconnecting says nothing reliable about the holder; wait a whole lease.
            if wasSynchronizing { state = .unknown }
            return .rejected
        }
        switch message.kind {
        case .claim, .renew: state = .held(gateway: message.id.gateway, incarnation: message.id.incarnation)
        case .release: state = .released(gateway: message.id.gateway, successor: message.successor)
        }
        return .accepted
    }
}
