public import DBus
public import Logging
import Basics

/// A bluetoothd 5.66 look-alike: owns `org.bluez` on a bus and behaves as BlueZ does towards its clients
/// (bleak, bluetoothctl, the keep-alive daemon) — object tree, discovery sessions, Connect/Disconnect with
/// bluetoothd's signal order, GATT reads, writes and notifications, real error names and texts, fault injection.
///
/// ```swift
/// let simulator = try await BlueZSimulator.start(
///     on: .address(bus.address),
///     configuration: .init(adapters: ["hci0"], devices: .sensors(count: 5), timeScale: 0.01))
/// try await simulator.inject(.connectAbort(count: 1), device: "C0:FF:EE:00:00:01")
/// #expect(simulator.connectedDevices.isEmpty)
/// await simulator.stop()
/// ```
///
/// Faults and power can also be driven from another process through the control interface
/// (`io.keepalive.Simulator1` at `/io/keepalive/Simulator`, name `io.keepalive.Simulator`), on a connection of
/// its own so that a simulated crash of bluetoothd leaves it up.
public final class BlueZSimulator: Sendable {
    /// The control interface's bus name, object path and interface.
    public static let controlName = "io.keepalive.Simulator"
    public static let controlPath: ObjectPath = "/io/keepalive/Simulator"
    public static let controlInterface = "io.keepalive.Simulator1"

    let engine: SimulatorEngine
    private let control = Locked<DBusConnection?>(nil)
    private let lifecycle = Locked<Task<Void, any Error>?>(nil)

    public var configuration: Configuration { engine.configuration }

    private init(engine: SimulatorEngine) {
        self.engine = engine
    }

    /// Connects to `bus`, exports the tree, takes `org.bluez` (and the control name) and returns once clients
    /// can use it.
    public static func start(
        on bus: DBusConnection.Bus, configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "bluez-sim")
    ) async throws -> BlueZSimulator {
        let simulator = BlueZSimulator(
            engine: try SimulatorEngine(configuration: configuration, bus: bus, logger: logger))
        try await simulator.engine.start()
        if let name = configuration.controlName {
            do {
                try await simulator.startControl(name: name)
            } catch {
                await simulator.engine.shutDown()
                throw error
            }
        }
        return simulator
    }

    /// Stops cleanly: links dropped, InterfacesRemoved, names released, connections closed.
    public func stop() async {
        lifecycle.withLock { $0?.cancel() }
        await engine.shutDown()
        let connection = control.withLock { control in
            defer { control = nil }
            return control
        }
        await connection?.close()
    }

    /// Whether the simulated bluetoothd owns org.bluez right now.
    public var isRunning: Bool { engine.connection != nil }

    /// The unique bus name of the org.bluez connection, when running.
    public var uniqueName: String? { engine.connection?.uniqueName }

    // MARK: Faults

    public func inject(_ fault: Fault, device address: String) async throws {
        try await engine.inject(fault, device: address)
    }

    /// Clears the fault named `name` (see `Fault.name`) on one device.
    public func clearFault(_ name: String, device address: String) throws {
        try engine.clearFault(name, device: address)
    }

    public func clearAllFaults() {
        engine.clearAllFaults()
    }

    /// bluetoothd crashes: the org.bluez connection closes abruptly (no InterfacesRemoved), every link is lost.
    /// `restart()` brings it back.
    public func crash() async {
        lifecycle.withLock { $0?.cancel() }
        await engine.crash()
    }

    /// bluetoothd restarts gracefully: InterfacesRemoved for everything, the name released, back after
    /// `Latencies.restart` (scaled) with a rebuilt tree and every device disconnected. After a crash it only
    /// starts again. Returns when org.bluez is back.
    public func restart() async throws {
        if isRunning { await engine.shutDown() }
        try await Task.sleep(for: engine.scaled(engine.configuration.latencies.restart))
        try await engine.start()
    }

    /// bluetoothd stopped (`systemctl stop bluetooth`) for `duration`, then started again: a graceful shutdown now
    /// (InterfacesRemoved, the name released), back after `duration` with a rebuilt tree. Returns when it is back.
    public func stop(for duration: Duration) async throws {
        if isRunning { await engine.shutDown() }
        try await Task.sleep(for: duration)
        try await engine.start()
    }

    /// Starts `stop(for:)` in the background (for the control interface, which replies first).
    func stopInBackground(for duration: Duration) {
        let task = Task { try await self.stop(for: duration) }
        lifecycle.withLock { $0 = task }
    }

    func setControl(_ connection: DBusConnection) {
        control.withLock { $0 = connection }
    }

    /// Starts `restart()` in the background (for the control interface, which replies first).
    func restartInBackground() {
        let task = Task { try await self.restart() }
        lifecycle.withLock { $0 = task }
    }

    // MARK: Adapters and devices

    /// Powers an adapter on or off, as `Powered` would; off drops every link and stops discovery.
    public func setPowered(_ on: Bool, adapter: String = "hci0") async throws {
        try await engine.setPowered(on, adapter: adapter, announcePowered: true)
    }

    /// rfkill: blocked powers the adapter off with PowerState "off-blocked" and refuses Powered=true.
    public func setBlocked(_ blocked: Bool, adapter: String = "hci0") async throws {
        try await engine.setBlocked(blocked, adapter: adapter)
    }

    /// Adds a device at run time; a cached one is exported at once (InterfacesAdded), others when discovered.
    @discardableResult
    public func addDevice(_ device: SimulatedDevice) async throws -> ObjectPath {
        let path = try engine.add(device)
        if device.cached, let connection = engine.connection {
            engine.model.withLock { $0.devices[path]?.exported = true }
            try await connection.export(engine.deviceObject(path, battery: false), at: path)
        }
        return path
    }

    /// A passive sensor falls silent (`false`: no more advertisements, its last data stays on the bus as
    /// bluetoothd keeps it) or speaks again (`true`, within one interval). For any device this is whether it
    /// advertises: one that does not also times out connects, as the `absent` fault.
    public func setAdvertising(_ advertising: Bool, device address: String) throws {
        let path = try engine.devicePath(address)
        engine.model.withLock { $0.devices[path]?.advertising = advertising }
    }

    /// Adds `count` passive sensors nobody configured (`[SimulatedDevice].randomAdvertisers`), found when
    /// discovered, advertising `rate` times a second in all (of real time: the interval is divided by the time
    /// scale again). Returns their addresses.
    @discardableResult
    public func addAdvertisers(
        count: Int, rate: Double = 1_000, seed: UInt64 = 1, adapter: String = "hci0",
        kinds: [SimulatedAdvertisement.Kind] = SimulatedAdvertisement.Kind.allCases, repeats: Int = 3
    ) throws -> [String] {
        // At most 65,535 at a time, as `--devices` allows.
        let count = min(count, 65_535)
        guard count > 0 else { return [] }
        let perSecond = rate > 0 && rate.isFinite ? rate : 1_000
        let interval = Duration.seconds(Double(count) / perSecond / configuration.timeScale)
        let taken = engine.model.withLock { Set($0.devicePathsByAddress.keys) }
        let devices = [SimulatedDevice].randomAdvertisers(
            count: count, seed: seed, adapter: adapter, interval: interval, repeats: repeats, kinds: kinds,
            excluding: taken)
        for device in devices { try engine.add(device) }
        return devices.map(\.address)
    }

    /// The object path BlueZ gives the device with `address`.
    public func devicePath(_ address: String) throws -> ObjectPath {
        try engine.devicePath(address)
    }

    // MARK: Statistics

    /// Addresses of the devices with Connected=true right now, sorted.
    public var connectedDevices: [String] {
        engine.model.withLock { model in model.devices.values.filter(\.connected).map(\.configuration.address).sorted()
        }
    }

    /// How many advertisements the passive sensor with `address` has sent (0 for any other device).
    public func advertisementsSent(_ address: String) -> UInt64 {
        guard let path = try? engine.devicePath(address) else { return 0 }
        return engine.model.withLock { model in model.advertisers.first { $0.path == path }?.sent ?? 0 }
    }

    /// How many advertisements every passive sensor together has sent.
    public var advertisementsSent: UInt64 {
        engine.model.withLock { model in model.advertisers.reduce(0) { $0 + $1.sent } }
    }

    /// How often each BlueZ method was called (`Connect`, `ReadValue`, …).
    public var callCounts: [String: Int] { engine.model.withLock { $0.callCounts } }

    /// The clients with a notify session on the characteristic at `path`.
    public func notifySessions(_ path: ObjectPath) -> Set<String> {
        engine.model.withLock { $0.characteristics[path]?.sessions ?? [] }
    }

    /// The clients with a discovery session on `adapter`.
    public func discoverySessions(adapter: String = "hci0") -> Set<String> {
        engine.model.withLock { $0.adapters[adapter]?.discoverySessions ?? [] }
    }
}
