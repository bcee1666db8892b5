/// The timing and placement parameters of one gateway. All durations in nanoseconds of the gateway's own clock.
///
/// Every gateway of a fleet should use the same lease: a claimant waits the longest lease it has seen on a topic
/// since connecting, or its own, whichever is longer — so to lengthen the lease, raise it everywhere first.
public struct FleetConfiguration: Sendable {
    /// This gateway's name: unique in the fleet, a valid topic level (see ``FleetTopics/isValidName(_:)``).
    public var gateway: String
    /// Different every time the process starts (e.g. random, or boot id + start time): makes message ids unique.
    public var incarnation: UInt64
    public var topics: FleetTopics
    public var version: String
    public var adapters: [GatewayDescription.Adapter]

    /// How long observers wait after the last lease message before they may claim.
    public var leaseNanoseconds: Int64 = 30_000_000_000
    /// How often the holder renews; well inside the fence so that two renewals can be lost before it matters.
    public var renewPeriodNanoseconds: Int64 = 10_000_000_000
    /// Subtracted from the lease (beyond the drift allowance) for the holder's self-fencing: covers a late timer
    /// and the time between the daemon's last check of `until` and the radio operation.
    public var fenceMarginNanoseconds: Int64 = 2_000_000_000
    /// Bound ρ on any gateway clock's rate error, in parts per million. 1000 covers a crystal (±100 ppm) plus
    /// NTP slewing of `CLOCK_BOOTTIME` (at most 500 ppm on Linux).
    public var clockRatePartsPerMillion: Int64 = 1_000
    /// A poll is permitted only if it can finish (by its deadline) before the fence.
    public var pollDeadlineNanoseconds: Int64 = 5_000_000_000
    /// After a lease expires, the n-th best candidate waits n × stagger more, so the best one normally wins.
    public var claimStaggerNanoseconds: Int64 = 1_000_000_000
    /// An own claim, renewal or release not echoed back by then is given up (the connection is probably gone).
    public var echoTimeoutNanoseconds: Int64 = 10_000_000_000
    /// A challenger must be better by this much…
    public var moveMarginDecibels: Int = 10
    /// …for this long before the holder hands the device over.
    public var moveDwellNanoseconds: Int64 = 120_000_000_000
    /// How often reach reports are published.
    public var reachPeriodNanoseconds: Int64 = 60_000_000_000
    /// Advertisements older than this mean the adapter no longer hears the device.
    public var observationStaleNanoseconds: Int64 = 180_000_000_000
    /// Reports older than this are ignored in placement (their gateway may be gone without a will, e.g. after a
    /// broker restart that kept its retained `online`).
    public var reportStaleNanoseconds: Int64 = 180_000_000_000

    public init(
        gateway: String, incarnation: UInt64, adapters: [GatewayDescription.Adapter], version: String = "0",
        topics: FleetTopics = FleetTopics()
    ) {
        self.gateway = gateway
        self.incarnation = incarnation
        self.adapters = adapters
        self.version = version
        self.topics = topics
    }

    /// How long after sending a lease message (that comes back accepted) the holder may still poll:
    /// lease × (1 − 2ρ) − margin. See docs/FLEET.md ("Why two holders cannot overlap").
    public var fenceAfterSendNanoseconds: Int64 {
        leaseNanoseconds - 2 * (leaseNanoseconds / 1_000_000) * clockRatePartsPerMillion - fenceMarginNanoseconds
    }

    /// What is wrong with this configuration, if anything; the daemon refuses to start the fleet otherwise.
    public var problems: [String] {
        var problems: [String] = []
        if !FleetTopics.isValidName(gateway) { problems.append("gateway name is not a valid topic level") }
        if adapters.isEmpty { problems.append("no adapters") }
        if leaseNanoseconds < 1_000_000_000 || leaseNanoseconds > 86_400_000_000_000 {
            problems.append("lease must be between 1 s and 1 day")
        }
        if clockRatePartsPerMillion < 0 || clockRatePartsPerMillion > 10_000 {
            problems.append("clock rate bound must be within 0…10000 ppm")
        }
        if renewPeriodNanoseconds <= 0 || 2 * renewPeriodNanoseconds >= fenceAfterSendNanoseconds {
            problems.append("renew period must be positive and fit twice into the fence (lease − drift − margin)")
        }
        if pollDeadlineNanoseconds < 0 || pollDeadlineNanoseconds >= fenceAfterSendNanoseconds - renewPeriodNanoseconds
        {
            problems.append("poll deadline leaves no time to poll between renewals")
        }
        return problems
    }
}
