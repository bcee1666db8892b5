import Fleet

/// The `fleet:` section: several gateways on one broker share devices marked `shared: true`, each polled by the
/// one gateway holding its lease (README "Several gateways", docs/FLEET.md). Absent: every device is this
/// gateway's alone, as before.
extension DaemonConfiguration {
    public struct Fleet: Sendable, Hashable {
        /// How long the others wait after the holder's last lease message before they may take a device (default
        /// 30 s). The same on every gateway of the fleet. A dead holder's devices move within lease + one interval.
        public var lease: Duration
        /// The first levels of the fleet's topics (default `keepalive/fleet`): the same on every gateway.
        public var topicPrefix: String
        /// The adapters the fleet may poll shared devices through (default: every adapter the devices use).
        public var adapters: [String]?
        /// How often this gateway listens for the shared devices' advertisements (their signal decides who holds
        /// them), and for how long each time (defaults 60 s and 5 s).
        public var scanEvery: Duration
        public var scanFor: Duration
        /// How many shared devices one adapter of this gateway may hold (default 64): a gateway that holds this
        /// many on every adapter takes no more, and the others place them. Polls are serial on `max_connections`
        /// links, so this is about how many polls fit an interval, not how many links are up.
        public var capacity: Int
        /// Where the section starts, for messages about it.
        public var location: SourceLocation?

        public init(
            lease: Duration = .seconds(30), topicPrefix: String = "keepalive/fleet", adapters: [String]? = nil,
            scanEvery: Duration = .seconds(60), scanFor: Duration = .seconds(5), capacity: Int = 64,
            location: SourceLocation? = nil
        ) {
            self.lease = lease
            self.topicPrefix = topicPrefix
            self.adapters = adapters
            self.scanEvery = scanEvery
            self.scanFor = scanFor
            self.capacity = capacity
            self.location = location
        }
    }

    /// The devices marked `shared: true` (with a `fleet:` section): the ones the fleet places.
    public var sharedDevices: [Device] { fleet == nil ? [] : devices.filter(\.shared) }

    /// The protocol's parameters for this gateway, derived from the lease and the shared devices' budgets: a fence
    /// margin of a tenth of the lease (at most 2 s), a poll allowed only when it can end before the fence (the
    /// longest budget of a shared device plus the ledger's grace), renewals every third of the lease or more often
    /// when a poll would not fit between two of them.
    func fleetConfiguration(gateway: String, incarnation: UInt64, version: String) -> FleetConfiguration? {
        guard let fleet else { return nil }
        let slots = fleet.capacity
        let adapters = (fleet.adapters ?? sharedDevices.map { $0.adapter ?? adapter }).reduce(into: [String]()) {
            if !$0.contains($1) { $0.append($1) }
        }
        var configuration = FleetConfiguration(
            gateway: gateway, incarnation: incarnation,
            adapters: adapters.map { GatewayDescription.Adapter(name: $0, slots: slots) }, version: version,
            topics: FleetTopics(prefix: fleet.topicPrefix)
        )
        let lease = fleet.lease.nanoseconds
        configuration.leaseNanoseconds = lease
        configuration.renewPeriodNanoseconds = lease / 3
        configuration.fenceMarginNanoseconds = min(2_000_000_000, lease / 10)
        configuration.echoTimeoutNanoseconds = min(10_000_000_000, lease / 3)
        let scheduler = keepAliveConfiguration
        let longest =
            sharedDevices.map { device in
                device.budget ?? scheduler.budget(forInterval: device.interval ?? interval)
            }.max() ?? .zero
        configuration.pollDeadlineNanoseconds = (longest + scheduler.ledger.gracePeriod).nanoseconds
        // A poll may start only while it can end before the fence, which a renewal pushes to (its send time + the
        // fence time); so renew often enough that, between renewals, a whole poll always fits. With the defaults
        // (30 s lease, a 30-s interval's 20 s budget + 2 s grace) that is every 4.46 s rather than every 10 s.
        let room = configuration.fenceAfterSendNanoseconds - configuration.pollDeadlineNanoseconds
        configuration.renewPeriodNanoseconds = max(0, min(lease / 3, room * 3 / 4))
        let stale = max(Int64(180_000_000_000), 3 * fleet.scanEvery.nanoseconds)
        configuration.observationStaleNanoseconds = stale
        configuration.reportStaleNanoseconds = stale
        return configuration
    }
}

extension DaemonConfiguration {
    /// One line for `run --check`: the fleet's settings and what they make of the protocol, or nil without one.
    public var fleetSummary: String? {
        guard let fleet,
            let protocolConfiguration = fleetConfiguration(gateway: "gateway", incarnation: 0, version: "0")
        else { return nil }
        let renew = Duration.nanoseconds(protocolConfiguration.renewPeriodNanoseconds).compact
        let deadline = Duration.nanoseconds(protocolConfiguration.pollDeadlineNanoseconds).compact
        let adapters = protocolConfiguration.adapters.map(\.name).joined(separator: ", ")
        return
            """
                fleet: \(sharedDevices.count) shared device\(sharedDevices.count == 1 ? "" : "s") on \(adapters), \
                lease \(fleet.lease.compact) 
                """
            + """
                (renewed every \(renew); a poll of up to \(deadline) must fit before the fence), topics \
                \(fleet.topicPrefix)/…, 
                """
            + """
                listening every \(fleet.scanEvery.compact) for \(fleet.scanFor.compact), at most \(fleet.capacity) \
                held per adapter
                """
    }
}
