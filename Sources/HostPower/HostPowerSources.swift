public import DBus
public import KeepAlive
public import Logging

/// Picks the host's power sources.
///
/// ```swift
/// let bus = try await DBusConnection(bus: .system)
/// let (power, description) = await HostPowerSources.automatic(connection: bus, logger: logger)
/// logger.info("power source: \(description)")
/// let keepAlive = KeepAlive(configuration: configuration, powerSource: power, logger: logger)
/// let group = ServiceGroup(services: [power, keepAlive], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
public enum HostPowerSources {
    /// The host's power as well as it can be known:
    ///
    /// - the battery from UPower when it is on the bus (or can be activated), else from sysfs when `sysfsRoot`
    ///   lists a mains supply or a system battery;
    /// - plus power-profiles-daemon (either of its names) when it is on the bus (or can be activated);
    /// - nothing found: always `.normal`.
    ///
    /// The result is always a ``CombinedPowerSource`` (with `override` when given), so the caller has one
    /// `Service` to run whatever was found; nothing starts before it runs. `description` names what was found,
    /// for the daemon's log and `doctor`. Each bus query is bounded by `callTimeout`; a query that fails counts
    /// as "not there".
    public static func automatic(
        connection: DBusConnection,
        sysfsRoot: String = "/sys/class/power_supply",
        criticalPercentage: Double = 10,
        clock: any Clock<Duration> = TimerFDClock(),
        override: ManualPowerSource? = nil,
        callTimeout: Duration = .seconds(5),
        logger: Logger
    ) async -> (source: CombinedPowerSource, description: String) {
        let bus = BusNames(connection: connection, timeout: callTimeout)
        let activatable = await bus.activatable()
        var sources: [any PowerSource] = []
        var parts: [String] = []

        if let how = await bus.availability(of: UPowerPowerSource.busName, activatable: activatable) {
            sources.append(
                UPowerPowerSource(
                    connection: connection, criticalPercentage: criticalPercentage, callTimeout: callTimeout,
                    logger: logger))
            parts.append("UPower (\(UPowerPowerSource.busName)\(how))")
        } else {
            let sysfs = SysfsPowerSource(
                root: sysfsRoot, criticalPercentage: criticalPercentage, validatedPollInterval: .seconds(30),
                clock: clock,
                logger: logger)
            if let supplies = try? PowerSupply.list(root: sysfsRoot), !supplies.isEmpty {
                sources.append(sysfs)
                parts.append("sysfs \(sysfsRoot) (\(supplies.map(\.name).joined(separator: ", ")))")
            }
        }

        var profileNames: [String] = []
        for name in PowerProfilesPowerSource.busNames {
            if let how = await bus.availability(of: name.name, activatable: activatable) {
                profileNames.append(name.name + how)
            }
        }
        if !profileNames.isEmpty {
            sources.append(PowerProfilesPowerSource(connection: connection, callTimeout: callTimeout, logger: logger))
            parts.append("power-profiles-daemon (\(profileNames.joined(separator: ", ")))")
        }

        let description: String
        if parts.isEmpty {
            description =
                """
                    none found (no UPower or power-profiles-daemon on the bus, no power supply in \(sysfsRoot)): \
                    always normal
                    """
        } else {
            description = parts.joined(separator: " + ")
        }
        var combined = sources
        if combined.isEmpty { combined = [FixedPowerSource(.normal)] }
        return (CombinedPowerSource(combined, override: override, logger: logger), description)
    }
}

/// The two bus queries the factory makes, bounded.
private struct BusNames {
    let connection: DBusConnection
    let timeout: Duration

    /// `org.freedesktop.DBus.ListActivatableNames`; empty when it fails.
    func activatable() async -> Set<String> {
        guard let reply = try? await busCall("ListActivatableNames") else { return [] }
        return Set(reply.first?.array?.compactMap(\.string) ?? [])
    }

    /// nil when `name` has no owner and cannot be activated; otherwise "" or ", activatable".
    func availability(of name: String, activatable: Set<String>) async -> String? {
        if let reply = try? await busCall("NameHasOwner", [.string(name)]), reply.first?.boolean == true {
            return ""
        }
        return activatable.contains(name) ? ", activatable" : nil
    }

    private func busCall(_ method: String, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await connection.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            method: method, arguments: arguments, timeout: timeout)
    }
}
