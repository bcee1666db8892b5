/// Everything one gateway keeps about one shared device.
struct SharedDevice: Sendable {
    enum Role: Equatable, Sendable {
        /// Not holding; may claim when the rule allows.
        case observing
        /// Sent a claim; holds only if it comes back accepted.
        case claiming(FleetMessageID, handover: Handover?)
        case holding
        /// Stopped polling and sent a release; waits for it to come back.
        case releasing(FleetMessageID, successor: String?)
    }

    struct Observation: Sendable {
        /// Smoothed RSSI in 1/16 dB, so the smoothing keeps its fractions in an integer.
        var rssiSixteenths: Int
        var at: FleetInstant
        var rssi: Int { (rssiSixteenths + (rssiSixteenths >= 0 ? 8 : -8)) / 16 }
    }

    struct ReceivedReport: Sendable {
        var report: ReachReport
        var at: FleetInstant
    }

    var view: LeaseView
    var role: Role = .observing
    /// When each of this gateway's lease messages still expected back was sent, by sequence number.
    var sentAt: [UInt64: FleetInstant] = [:]
    var lastRenewalSent: FleetInstant?
    /// While holding: the instant after which this gateway may no longer poll.
    var fence: FleetInstant?
    /// While holding: the adapter polls go through.
    var adapter: String?
    /// The handover to put into the first poll's record, until that poll happens.
    var pendingHandover: Handover?
    var observations: [String: Observation] = [:]
    /// Recent poll success in parts per thousand (exponentially smoothed).
    var successPermille = 1000
    var reports: [String: ReceivedReport] = [:]
    var gatewayChallenge = ChallengeTracker()
    var adapterChallenge = ChallengeTracker()
    /// The deadline the device's timer is armed at, to ask again only when it changes.
    var armedDeadline: FleetInstant?

    init(connectedAt now: FleetInstant, leaseNanoseconds: Int64) {
        view = LeaseView(connectedAt: now, leaseNanoseconds: leaseNanoseconds)
    }

    var isHolding: Bool { role == .holding }

    /// The time of the oldest message still expected back, if any.
    var oldestUnechoed: FleetInstant? { sentAt.values.min() }
}
