public import DBus
public import KeepAlive
public import Logging
public import ServiceLifecycle

/// The host's power as power-profiles-daemon sees it: `ActiveProfile` `power-saver` → `.lowPower`, any other
/// profile (or no daemon on the bus) → `.normal`.
///
/// Both of the daemon's bus names are followed, whichever is present: `org.freedesktop.UPower.PowerProfiles`
/// (`/org/freedesktop/UPower/PowerProfiles`, since 0.20) and the older `net.hadess.PowerProfiles`
/// (`/net/hadess/PowerProfiles`, which newer daemons still own too). A power saver on either wins.
///
/// A `Service`, driven like ``UPowerPowerSource``: nothing happens until ``run()`` runs; it follows
/// `PropertiesChanged` and the names leaving and returning, returns on cancellation or graceful shutdown,
/// throws when the bus connection is lost (after falling back to `.normal`), and bounds every call.
///
/// ```swift
/// let profiles = PowerProfilesPowerSource(connection: bus, logger: logger)
/// let power = CombinedPowerSource([upower, profiles])
/// let group = ServiceGroup(services: [power, keepAlive], gracefulShutdownSignals: [.sigterm], logger: logger)
/// ```
public final class PowerProfilesPowerSource: PowerSource, Service {
    /// One of the daemon's names and its object.
    public struct BusName: Sendable, Hashable {
        public var name: String
        public var path: ObjectPath
    }

    /// The names followed, newest first.
    public static let busNames = [
        BusName(name: "org.freedesktop.UPower.PowerProfiles", path: "/org/freedesktop/UPower/PowerProfiles"),
        BusName(name: "net.hadess.PowerProfiles", path: "/net/hadess/PowerProfiles"),
    ]

    /// The profile that means "save energy".
    public static let powerSaver = "power-saver"

    private let mirror: BusPropertyMirror

    /// Nothing starts here: ``run()`` does the work. `callTimeout` bounds every D-Bus call.
    public init(connection: DBusConnection, callTimeout: Duration = .seconds(5), logger: Logger) {
        // Each name's interface is spelled like the name itself.
        let objects = Self.busNames.map { WatchedObject(service: $0.name, path: $0.path, interface: $0.name) }
        mirror = BusPropertyMirror(
            connection: connection, name: "power-profiles-daemon", objects: objects, callTimeout: callTimeout,
            logger: logger
        ) { snapshot in
            Self.verdict(snapshot, objects: objects)
        }
    }

    public var state: PowerState {
        mirror.cell.state
    }

    public func updates() -> AsyncStream<PowerState> {
        mirror.cell.subscribe()
    }

    /// The active profile in words: `power profile power-saver (net.hadess.PowerProfiles)`.
    public var summary: String {
        mirror.summary
    }

    /// The bus names present when last looked at.
    public var presentBusNames: Set<String> {
        mirror.presentServices
    }

    /// How many times a name's properties were read whole.
    public var syncCount: Int {
        mirror.syncCount
    }

    /// Follows the daemon until cancelled or shut down gracefully; throws when the bus connection is lost.
    public func run() async throws {
        try await cancelWhenGracefulShutdown { [mirror] in
            try await mirror.run()
        }
    }

    static func verdict(_ snapshot: BusSnapshot, objects: [WatchedObject]) -> PowerVerdict {
        let profiles = objects.compactMap { object -> (name: String, profile: String)? in
            guard snapshot.presentServices.contains(object.service),
                let profile = snapshot.value("ActiveProfile", of: object)?.string
            else { return nil }
            return (object.service, profile)
        }
        if let saver = profiles.first(where: { $0.profile == powerSaver }) {
            return PowerVerdict(state: .lowPower, reason: "power profile \(powerSaver) (\(saver.name))")
        }
        guard let first = profiles.first else {
            return PowerVerdict(state: .normal, reason: "power-profiles-daemon: no active profile")
        }
        return PowerVerdict(state: .normal, reason: "power profile \(first.profile) (\(first.name))")
    }
}
