import Fleet

/// Everything a run depends on besides the seed: sizes, durations, network and fault rates, and the fleet's
/// configuration. Times in nanoseconds of true (virtual) time.
public struct SimulationScenario: Sendable {
    /// What the broker keeps of its retained messages across a restart (mosquitto: `persistence false`, or
    /// `persistence true`, which writes the database at autosave intervals and on a clean shutdown).
    public enum Persistence: Sendable, CaseIterable {
        case none
        /// Everything retained survives (a clean shutdown with persistence).
        case full
        /// The last autosave survives: retained messages may come back *older* than the last ones published.
        case autosave
    }

    public var gateways = 100
    public var devices = 10_000
    /// Each device is configured on this many gateways (chosen per device).
    public var gatewaysPerDevice: ClosedRange<Int> = 2...4
    public var duration: Int64 = 600 * second
    /// Faults happen in [faultsStart, faultsEnd); afterwards the fleet must converge and stay put.
    public var faultsStart: Int64 = 60 * second
    public var faultsEnd: Int64 = 240 * second
    public var kills = 4
    public var partitions = 4
    public var brokerRestarts = 1
    public var persistence: Persistence = .autosave
    public var autosavePeriod: Int64 = 30 * second
    /// One-way network delay per burst, uniform; FIFO per connection is kept regardless.
    public var delay: ClosedRange<Int64> = 1 * millisecond...40 * millisecond
    /// With this probability (‰) a burst is delayed up to `spikeDelay` instead (a congested link).
    public var spikePermille = 5
    public var spikeDelay: Int64 = 2 * second
    /// MQTT keep-alive: a client notices a dead connection after this, the broker fires the will after 1.5×.
    public var keepAlive: Int64 = 10 * second
    public var reconnectPeriod: ClosedRange<Int64> = 1 * second...4 * second
    /// Gateways' clock rate errors are drawn within ± this (the protocol's ρ should be at least as large).
    public var driftPartsPerMillion: Int64 = 1_000
    /// How often each gateway hears each of its devices, and how noisy the RSSI is around its true value.
    public var advertisementPeriod: Int64 = 10 * second
    public var rssiNoise: Int = 3
    /// The poll interval: the "one interval" of the liveness bound.
    public var pollInterval: Int64 = 10 * second
    /// The fleet's parameters, apart from names and incarnations, which the simulator fills in.
    public var leaseNanoseconds: Int64 = 30 * second
    public var renewPeriodNanoseconds: Int64 = 10 * second
    public var fenceMarginNanoseconds: Int64 = 2 * second
    public var moveDwellNanoseconds: Int64 = 120 * second
    public var reachPeriodNanoseconds: Int64 = 60 * second

    public static let millisecond: Int64 = 1_000_000
    public static let second: Int64 = 1_000_000_000

    public init() {}

    func configuration(gateway: String, incarnation: UInt64) -> FleetConfiguration {
        var configuration = FleetConfiguration(
            gateway: gateway, incarnation: incarnation, adapters: [.init(name: "hci0", slots: 1_000)])
        configuration.leaseNanoseconds = leaseNanoseconds
        configuration.renewPeriodNanoseconds = renewPeriodNanoseconds
        configuration.fenceMarginNanoseconds = fenceMarginNanoseconds
        configuration.clockRatePartsPerMillion = max(driftPartsPerMillion, 1)
        configuration.moveDwellNanoseconds = moveDwellNanoseconds
        configuration.reachPeriodNanoseconds = reachPeriodNanoseconds
        configuration.reportStaleNanoseconds = 3 * reachPeriodNanoseconds
        configuration.observationStaleNanoseconds = 3 * reachPeriodNanoseconds
        return configuration
    }
}

private let second = SimulationScenario.second
private let millisecond = SimulationScenario.millisecond
