/// The identity of one lease message: unique across the fleet because gateway names are unique, a gateway's
/// incarnation changes every time its process starts, and the sequence only grows within an incarnation.
///
/// The lease rule compares these for equality only (compare-and-swap on "the last message of the topic").
public struct FleetMessageID: Hashable, Sendable, CustomStringConvertible {
    public var gateway: String
    public var incarnation: UInt64
    public var sequence: UInt64

    public init(gateway: String, incarnation: UInt64, sequence: UInt64) {
        self.gateway = gateway
        self.incarnation = incarnation
        self.sequence = sequence
    }

    public var description: String { "\(gateway)/\(incarnation)/\(sequence)" }
}

/// A message on a device's lease topic (`<prefix>/device/<device>/lease`, always retained, QoS 1).
public struct LeaseMessage: Equatable, Sendable {
    public enum Kind: String, Sendable {
        /// "I take the device": valid only as the immediate successor of `previous`.
        case claim
        /// "I still hold it": sent by the holder every renew period, valid under the same rule.
        case renew
        /// "I stopped polling it": frees the device at once, optionally for a named successor.
        case release
    }

    public var kind: Kind
    public var id: FleetMessageID
    /// The id of the last message of this topic its sender had seen, or nil if it had seen none since connecting.
    public var previous: FleetMessageID?
    /// How long observers wait, from receiving this message, before they may claim. Carried in the message so a
    /// fleet with mixed configurations still agrees on each lease.
    public var leaseNanoseconds: Int64
    /// For a release: the gateway the holder hands the device to (a placement move); others hold back a little.
    public var successor: String?

    public init(
        kind: Kind, id: FleetMessageID, previous: FleetMessageID?, leaseNanoseconds: Int64, successor: String? = nil
    ) {
        self.kind = kind
        self.id = id
        self.previous = previous
        self.leaseNanoseconds = leaseNanoseconds
        self.successor = successor
    }
}

/// What one gateway can do for one device (`<prefix>/device/<device>/reach/<gateway>`, retained, QoS 0 is enough):
/// the input of placement.
public struct ReachReport: Equatable, Sendable {
    public var gateway: String
    /// The adapter this gateway would use (its own choice, by the same hysteresis rule as between gateways).
    public var adapter: String
    /// Smoothed RSSI in dBm, or nil when this gateway has stopped hearing the device (stale advertisements).
    public var rssi: Int?
    /// Recent poll success rate in parts per thousand (1000 when this gateway has no recent polls to judge by).
    public var successPermille: Int
    /// Free connection slots on `adapter`, not counting this device if this gateway holds it.
    public var freeSlots: Int

    public init(gateway: String, adapter: String, rssi: Int?, successPermille: Int, freeSlots: Int) {
        self.gateway = gateway
        self.adapter = adapter
        self.rssi = rssi
        self.successPermille = successPermille
        self.freeSlots = freeSlots
    }
}

/// A gateway's retained self-description (`<prefix>/gateway/<gateway>/description`).
public struct GatewayDescription: Equatable, Sendable {
    public struct Adapter: Equatable, Sendable {
        public var name: String
        /// How many connections this adapter can hold at once.
        public var slots: Int

        public init(name: String, slots: Int) {
            self.name = name
            self.slots = slots
        }
    }

    public var gateway: String
    public var version: String
    public var adapters: [Adapter]

    public init(gateway: String, version: String, adapters: [Adapter]) {
        self.gateway = gateway
        self.version = version
        self.adapters = adapters
    }
}

/// A gateway's retained presence (`<prefix>/gateway/<gateway>/status`): `online` when it connects, `offline` as
/// its last will (and when it leaves cleanly). Plain text, as Home Assistant's availability topics expect.
public enum GatewayStatus: String, Sendable {
    case online
    case offline
}
