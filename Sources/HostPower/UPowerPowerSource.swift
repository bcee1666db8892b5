public import DBus
public import KeepAlive
public import Logging
public import ServiceLifecycle

/// The host's power as UPower (`org.freedesktop.UPower`, on the system bus) sees it.
///
/// - `OnBattery` of `/org/freedesktop/UPower` → `.lowPower`;
/// - the display device (`/org/freedesktop/UPower/devices/DisplayDevice`, `org.freedesktop.UPower.Device`, the
///   composite of the system's batteries) with `WarningLevel` Critical (4) or Action (5), or — on battery, with
///   a battery present — `Percentage` at or below ``criticalPercentage`` → `.critical`;
/// - otherwise, and whenever UPower is not on the bus, `.normal`.
///
/// A `Service`: nothing happens until ``run()`` runs, and it must keep running for the state to follow UPower
/// (`PropertiesChanged` for changes, `NameOwnerChanged` for UPower leaving — `.normal` and a log line — and
/// returning — read again). `run()` returns on cancellation or graceful shutdown and throws when the bus
/// connection is lost (after falling back to `.normal`). Every call it makes is bounded by `callTimeout`;
/// ``state`` only reads a cached value.
///
/// ```swift
/// let bus = try await DBusConnection(bus: .system)
/// let upower = UPowerPowerSource(connection: bus, logger: logger)
/// let keepAlive = KeepAlive(configuration: configuration, powerSource: upower, logger: logger)
/// let group = ServiceGroup(services: [upower, keepAlive], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
public final class UPowerPowerSource: PowerSource, Service {
    public static let busName = "org.freedesktop.UPower"
    public static let objectPath: ObjectPath = "/org/freedesktop/UPower"
    public static let interface = "org.freedesktop.UPower"
    public static let displayDevicePath: ObjectPath = "/org/freedesktop/UPower/devices/DisplayDevice"
    public static let deviceInterface = "org.freedesktop.UPower.Device"

    /// UPower's `WarningLevel` (`UpDeviceLevel`): 0 unknown, 1 none, 2 discharging (UPSes only), 3 low,
    /// 4 critical, 5 action (the critical action is about to be taken).
    static let criticalWarningLevel: UInt32 = 4

    static let daemon = WatchedObject(service: busName, path: objectPath, interface: interface)
    static let displayDevice = WatchedObject(service: busName, path: displayDevicePath, interface: deviceInterface)

    /// The display device's `Percentage` at or below which a host on battery is `.critical`.
    public let criticalPercentage: Double
    private let mirror: BusPropertyMirror

    /// Nothing starts here: ``run()`` does the work.
    ///
    /// - Parameters:
    ///   - criticalPercentage: on battery, at or below this percentage the state is `.critical` even when
    ///     UPower's own warning level is not (yet) critical.
    ///   - callTimeout: the bound of every D-Bus call (`GetAll`).
    public init(
        connection: DBusConnection, criticalPercentage: Double = 10, callTimeout: Duration = .seconds(5),
        logger: Logger
    ) {
        self.criticalPercentage = criticalPercentage
        mirror = BusPropertyMirror(
            connection: connection, name: "UPower", objects: [Self.daemon, Self.displayDevice],
            callTimeout: callTimeout, logger: logger
        ) { snapshot in
            Self.verdict(snapshot, criticalPercentage: criticalPercentage)
        }
    }

    public var state: PowerState {
        mirror.cell.state
    }

    public func updates() -> AsyncStream<PowerState> {
        mirror.cell.subscribe()
    }

    /// What UPower last said, in words: `UPower: on battery, 54%`, `UPower: not on the bus`.
    public var summary: String {
        mirror.summary
    }

    /// Whether UPower was on the bus when last looked at.
    public var isServicePresent: Bool {
        !mirror.presentServices.isEmpty
    }

    /// How many times UPower's properties were read whole (1 at start, +1 each time it returns to the bus).
    public var syncCount: Int {
        mirror.syncCount
    }

    /// Follows UPower until cancelled or shut down gracefully; throws when the bus connection is lost.
    public func run() async throws {
        try await cancelWhenGracefulShutdown { [mirror] in
            try await mirror.run()
        }
    }

    static func verdict(_ snapshot: BusSnapshot, criticalPercentage: Double) -> PowerVerdict {
        let onBattery = snapshot.value("OnBattery", of: daemon)?.boolean ?? false
        let warningLevel = snapshot.value("WarningLevel", of: displayDevice)?.uint32 ?? 0
        let batteryPresent = snapshot.value("IsPresent", of: displayDevice)?.boolean ?? false
        let percentage = batteryPresent ? snapshot.value("Percentage", of: displayDevice)?.double : nil
        let charge = percentage.map { ", \(Self.format($0))%" } ?? ""
        if warningLevel >= criticalWarningLevel {
            let level = warningLevel == criticalWarningLevel ? "critical" : "action"
            return PowerVerdict(state: .critical, reason: "UPower: battery warning level \(level)\(charge)")
        }
        guard onBattery else { return PowerVerdict(state: .normal, reason: "UPower: on mains\(charge)") }
        if let percentage, percentage <= criticalPercentage {
            return PowerVerdict(
                state: .critical,
                reason: "UPower: on battery\(charge), at or below \(Self.format(criticalPercentage))%")
        }
        return PowerVerdict(state: .lowPower, reason: "UPower: on battery\(charge)")
    }

    private static func format(_ percentage: Double) -> String {
        percentage.rounded() == percentage ? "\(Int(percentage))" : "\(percentage)"
    }
}
