import Fleet
internal import YAML

// `fleet:` and each device's `shared:`: several gateways placing shared devices through the broker, each value
// checked where it is written (README "Several gateways").

extension ConfigurationLoader {
    static let fleetKeys = ["lease", "topic_prefix", "adapters", "scan", "capacity"]

    static func fleet(_ node: YAMLNode, in document: Document) throws(ConfigurationError) -> DaemonConfiguration.Fleet {
        let fields = try Fields(
            node, path: "fleet", allowed: fleetKeys, in: document, expected: "a mapping like {lease: 30s}")
        var fleet = DaemonConfiguration.Fleet(location: document.location(node))
        for pair in fields.pairs {
            let value = pair.value
            let field = fields.field(pair.key)
            switch pair.key {
            case "lease":
                fleet.lease = try document.duration(value, field)
                guard fleet.lease >= .seconds(3), fleet.lease <= .seconds(3_600) else {
                    throw document.error(
                        .invalidValue, at: value, field,
                        "a lease of \(fleet.lease.compact): it must be from 3s to 1h (30s suits most fleets)")
                }
            case "topic_prefix":
                let prefix = try document.nonEmptyText(value, field, expected: "topic levels like keepalive/fleet")
                let levels = prefix.split(separator: "/", omittingEmptySubsequences: false)
                guard prefix.utf8.count <= 128, levels.allSatisfy({ FleetTopics.isValidName(String($0)) }) else {
                    throw document.error(
                        .invalidValue, at: value, field,
                        """
                            `\(shown(prefix))` is not a topic prefix like keepalive/fleet: levels without +, #, \
                            spaces or empty ones
                            """
                    )
                }
                fleet.topicPrefix = prefix
            case "adapters":
                let items = try document.sequence(value, field, expected: "a list of adapters like [hci0, hci1]")
                var adapters: [String] = []
                for (index, item) in items.enumerated() {
                    let adapter = try document.adapter(item, "\(field)[\(index)]")
                    guard !adapters.contains(adapter) else {
                        throw document.error(
                            .invalidValue, at: item, "\(field)[\(index)]", "\(adapter) is listed twice")
                    }
                    adapters.append(adapter)
                }
                guard !adapters.isEmpty else {
                    throw document.error(
                        .invalidValue, at: value, field,
                        "the list is empty: leave `adapters` out to use every adapter the devices use")
                }
                fleet.adapters = adapters
            case "capacity": fleet.capacity = try document.integer(value, field, in: 1...100_000)
            case "scan":
                let scan = try Fields(
                    value, path: field, allowed: ["every", "for"], in: document,
                    expected: "a mapping like {every: 60s, for: 5s}")
                if let every = scan["every"] { fleet.scanEvery = try document.duration(every, scan.field("every")) }
                if let duration = scan["for"] { fleet.scanFor = try document.duration(duration, scan.field("for")) }
            default: break
            }
        }
        return fleet
    }
}

extension DaemonConfiguration {
    /// The first thing wrong with the fleet's settings, as a field and a message; nil when none (or no fleet).
    func fleetProblem() -> (field: String, message: String, device: Int?)? {
        if fleet == nil {
            if let index = devices.firstIndex(where: \.shared) {
                return (
                    "devices[\(index)].shared",
                    "a shared device needs a `fleet:` section (and `mqtt:`): the gateways share it through the broker",
                    index
                )
            }
            return nil
        }
        if let fleet, fleet.scanFor >= fleet.scanEvery {
            return (
                "fleet.scan",
                """
                    scanning for \(fleet.scanFor.compact) every \(fleet.scanEvery.compact): `for` must be shorter \
                    than `every`
                    """,
                nil
            )
        }
        guard mqtt != nil else {
            return ("fleet", "the fleet works through the broker: add an `mqtt:` section", nil)
        }
        guard devices.contains(where: \.shared) else {
            return (
                "fleet", "no device says `shared: true`: mark the devices other gateways also poll, or remove `fleet:`",
                nil
            )
        }
        var firstShared: [String: Int] = [:]
        for (index, device) in devices.enumerated() {
            guard device.shared else { continue }
            guard FleetTopics.isValidName(device.address.uppercased()) else {
                return ("devices[\(index)].address", "`\(device.address)` cannot be a topic level", index)
            }
            if let first = firstShared[device.address.uppercased()] {
                return (
                    "devices[\(index)].shared",
                    """
                        \(device.address) is shared in devices[\(first)] already: list a shared device once, the \
                        fleet picks its adapter (fleet.adapters)
                        """,
                    index
                )
            }
            firstShared[device.address.uppercased()] = index
        }
        guard let configuration = fleetConfiguration(gateway: "gateway", incarnation: 0, version: "0") else {
            return nil
        }
        if let problem = configuration.problems.first {
            let lease = fleet?.lease.compact ?? "?"
            let deadline = Duration.nanoseconds(configuration.pollDeadlineNanoseconds).compact
            return (
                "fleet.lease",
                """
                    a lease of \(lease) does not fit a poll of up to \(deadline) (the longest shared device's budget \
                    and the ledger's grace): \(problem); lengthen the lease or shorten the budgets
                    """,
                nil
            )
        }
        return nil
    }
}
