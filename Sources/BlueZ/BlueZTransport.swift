public import DBus
public import KeepAlive
public import Polling
public import Logging
public import ServiceLifecycle
import Basics

/// Polls real Bluetooth hardware through BlueZ over D-Bus: the production `PeripheralTransport` (from `KeepAlive`).
///
/// It keeps one ``BlueZObjectCache`` of BlueZ's tree and meets the transport contract against everything real
/// bluetoothd 5.66 does (docs/BLUEZ.md): the adapter is always named and its power/rfkill state
/// checked; a device object already present counts as found, otherwise discovery runs until it appears;
/// `Connect` runs under its own deadline and is cancelled by `Disconnect`; after it returns, `Connected` is
/// read rather than awaited (the signal may never come); then `ServicesResolved`, then the wanted
/// characteristics (they can appear after `ServicesResolved`). Operations on a device fail at once when it
/// vanishes or bluetoothd leaves the bus. After repeated failures a device's stale object is removed
/// (`RemoveDevice`) so it is rediscovered — bounded by a cooldown, and logged.
///
/// ```swift
/// let transport = try await BlueZTransport(bus: .system)
/// try await withThrowingDiscardingTaskGroup { group in
///     group.addTask { try await transport.run() }       // keeps BlueZ's object tree current
///     try await transport.waitUntilReady(timeout: .seconds(5))
///     let battery = try await transport.read(BluetoothUUID(assigned: 0x2A19), from: sensor)
///     group.cancelAll()
/// }
/// ```
/// Put ``run()`` beside the scheduler (a task group, or a `ServiceGroup`); everything else is an operation of
/// `PeripheralTransport`, so a `PollEngine` drives it unchanged.
public final class BlueZTransport: PeripheralTransport, Service {
    public struct Configuration: Sendable {
        /// D-Bus timeout for ReadValue/WriteValue/StartNotify: longer than BlueZ's own 30 s ATT timeout, so
        /// BlueZ's answer (and its link teardown) is what we see. Windows bound it further.
        public var gattTimeout: Duration = .seconds(35)
        /// How long to wait, after ServicesResolved, for wanted characteristics that have not appeared yet
        /// (real BlueZ can send ServicesResolved before the GATT objects), before fetching the tree again.
        public var characteristicGrace: Duration = .seconds(1)
        /// Consecutive failed connects of one device after which its object is removed and rediscovered.
        public var staleDeviceThreshold: Int = 3
        /// At most one removal per device per this long.
        public var staleDeviceCooldown: Duration = .seconds(600)

        public init() {}
    }

    /// BlueZ's object tree as this transport sees it: adapters, devices and their GATT objects, for diagnostics
    /// and tools. Operations do not need it; ``run()`` keeps it current.
    public let cache: BlueZObjectCache

    /// The D-Bus connection's thread: every operation runs there (see `PeripheralTransport.preferredExecutor`).
    public var preferredExecutor: (any TaskExecutor)? { connection.taskExecutor }
    public let configuration: Configuration
    let connection: DBusConnection
    let logger: Logger
    let time: TimeBase
    let discovery: DiscoverySessions
    let health = Locked<[Peripheral: DeviceHealth]>([:])
    let connectedQueries = Locked(0)
    /// Disconnects in flight, one per peripheral: a second `disconnect` joins the first instead of sending
    /// BlueZ another Disconnect (which it would answer with InProgress).
    let disconnects = Locked<[Peripheral: Task<Void, Never>]>([:])

    /// How often `Connected` had to be asked for after Connect returned, because its signal never came
    /// (real-BlueZ quirk 2). Zero on a well-behaved bluetoothd.
    public var missedConnectedSignals: Int {
        connectedQueries.withLock { $0 }
    }

    struct DeviceHealth {
        var consecutiveFailures = 0
        var lastRemoval: KeepAliveInstant?
        /// How long the last successful connect spent resolving services (`serviceResolutionTime(of:)`).
        var lastResolution: Duration?
    }

    public init(
        connection: DBusConnection,
        configuration: Configuration = Configuration(),
        clock: any Clock<Duration> = TimerFDClock(),
        logger: Logger = Logger(label: "keepalive.bluez")
    ) {
        self.connection = connection
        self.configuration = configuration
        self.logger = logger
        self.time = TimeBase(clock)
        self.cache = BlueZObjectCache(connection: connection, clock: clock, logger: logger)
        self.discovery = DiscoverySessions(connection: connection, logger: logger)
    }

    /// Connects to `bus` (the system bus, where bluetoothd lives, unless told otherwise) and makes a transport on
    /// a connection of its own.
    ///
    /// - Throws: `DBusError` when the bus cannot be reached.
    public convenience init(
        bus: DBusConnection.Bus = .system,
        configuration: Configuration = Configuration(),
        clock: any Clock<Duration> = TimerFDClock(),
        logger: Logger = Logger(label: "keepalive.bluez")
    ) async throws {
        let connection = try await DBusConnection(bus: bus)
        self.init(connection: connection, configuration: configuration, clock: clock, logger: logger)
    }

    /// Keeps the object cache current (signals, bluetoothd restarts, adapters coming and going) until cancelled,
    /// ended by a `ServiceGroup`'s graceful shutdown, or the bus is lost (then it throws). Operations need it
    /// running: start it first, then ``waitUntilReady(timeout:)``.
    public func run() async throws {
        try await cancelWhenGracefulShutdown {
            try await self.cache.run()
        }
    }

    /// ``run()`` without the graceful-shutdown hook, for the daemon: its shutdown disconnects every link and
    /// waits for BlueZ to confirm, which needs the tree current until the very end.
    package func runUntilCancelled() async throws {
        try await cache.run()
    }

    /// Waits until BlueZ's object tree has been fetched, i.e. org.bluez is on the bus and ``run()`` has caught
    /// up with it. Returns at once when it already has.
    ///
    /// - Throws: `TransportError` `.timeout` when org.bluez does not appear within `timeout`
    ///   (bluetoothd is not running, or the bus is not the one it is on); `CancellationError` when cancelled.
    public func waitUntilReady(timeout: Duration) async throws {
        try await cache.waitUntilReady(timeout: timeout)
    }

    // MARK: Adapter

    /// The named adapter, checked: present, powered, not rfkill-blocked.
    public func checkAdapter(_ name: String) throws -> Adapter1 {
        guard let reading = cache.adapterReading(named: name) else {
            throw TransportError(.serviceUnavailable, "org.bluez is not on the bus (is bluetoothd running?)")
        }
        guard let adapter = reading.adapter else {
            let known = reading.names.joined(separator: ", ")
            throw TransportError(
                .adapterNotFound, "adapter \(name) not found (adapters: \(known.isEmpty ? "none" : known))")
        }
        if adapter.powerState == "off-blocked" {
            throw TransportError(
                .adapterUnavailable,
                "adapter \(name) is rfkill-blocked (PowerState off-blocked): run `rfkill unblock bluetooth`"
            )
        }
        guard adapter.powered else {
            throw TransportError(
                .adapterUnavailable, "adapter \(name) is powered off (PowerState \(adapter.powerState ?? "off"))")
        }
        return adapter
    }

    // MARK: Calls

    /// One method call to org.bluez, with BlueZ's errors mapped to the core taxonomy.
    func call(
        _ path: ObjectPath,
        _ interface: String,
        _ method: String,
        _ arguments: [DBusValue] = [],
        expecting signature: DBusSignature = "",
        timeout: Duration,
        cancellation: CallCancellation? = nil,
        context: @autoclosure () -> String
    ) async throws -> [DBusValue] {
        let reply: [DBusValue]
        do {
            reply = try await connection.call(
                destination: BlueZ.service,
                path: path,
                interface: interface,
                method: method,
                arguments: arguments,
                timeout: max(timeout, .milliseconds(1)),
                cancellation: cancellation
            )
        } catch let error as DBusError {
            throw BlueZErrors.transportError(error, context: context())
        }
        try Self.check(reply, is: signature, context: context())
        return reply
    }

    /// BlueZ's replies have fixed signatures (nothing for Connect, WriteValue, StartNotify…; `ay` for
    /// ReadValue): any other answer is a protocol error, reported rather than ignored.
    static func check(_ reply: [DBusValue], is signature: DBusSignature, context: @autoclosure () -> String) throws {
        guard reply.signature == signature else {
            throw TransportError(
                .protocolError, "\(context()): expected a reply of type '\(signature)', got '\(reply.signature)'")
        }
    }

    /// Runs `body` in a task of its own, so that it completes even when the caller was cancelled (cleanup:
    /// Disconnect, StopNotify must still go out).
    func detached<T: Sendable>(_ body: @escaping @Sendable () async -> T) async -> T {
        await Task(executorPreference: connection.taskExecutor) { await body() }.value
    }

    static func emptyOptions() -> DBusValue {
        .dictionary(key: "s", value: "v", [])
    }
}

/// One discovery session per adapter for this connection (BlueZ answers a second StartDiscovery on the same
/// connection with InProgress), shared by everyone who needs it and stopped when the last one is done. Its
/// filter is the widest of its users' (no UUIDs when one wants every device, `DuplicateData` when one wants
/// repeats), set again when a new user widens it.
actor DiscoverySessions {
    let connection: DBusConnection
    let logger: Logger
    private var users: [String: [DiscoveryFilter]] = [:]
    /// The filter BlueZ has for each adapter's session.
    private var applied: [String: DiscoveryFilter] = [:]

    init(connection: DBusConnection, logger: Logger) {
        self.connection = connection
        self.logger = logger
    }

    /// The filter that lets through what every one of `filters` wants (addresses are the caller's own check).
    static func merged(_ filters: [DiscoveryFilter]) -> DiscoveryFilter {
        var merged = DiscoveryFilter()
        guard !filters.isEmpty else { return merged }
        if filters.allSatisfy({ !$0.serviceUUIDs.isEmpty }) {
            var seen = Set<BluetoothUUID>()
            merged.serviceUUIDs = filters.flatMap(\.serviceUUIDs).filter { seen.insert($0).inserted }
        }
        merged.rssi = filters.allSatisfy({ $0.rssi != nil }) ? filters.compactMap(\.rssi).min() : nil
        merged.duplicateData = filters.contains { $0.duplicateData }
        return merged
    }

    func acquire(adapter: String, filter: DiscoveryFilter) async throws {
        users[adapter, default: []].append(filter)
        let wanted = Self.merged(users[adapter] ?? [])
        let first = users[adapter]?.count == 1
        guard first || applied[adapter] != wanted else { return }
        do {
            let path = try BlueZ.adapterPath(adapter)
            var entries: [DBusDictionaryEntry] = [.init(key: .string("Transport"), value: .variant(.string("le")))]
            if !wanted.serviceUUIDs.isEmpty {
                entries.append(
                    .init(
                        key: .string("UUIDs"),
                        value: .variant(.array(element: "s", wanted.serviceUUIDs.map { .string($0.description) }))))
            }
            if let rssi = wanted.rssi {
                entries.append(.init(key: .string("RSSI"), value: .variant(.int16(rssi))))
            }
            if wanted.duplicateData {
                entries.append(.init(key: .string("DuplicateData"), value: .variant(.boolean(true))))
            }
            let filtered = try await connection.call(
                destination: BlueZ.service, path: path, interface: BlueZ.adapterInterface, method: "SetDiscoveryFilter",
                arguments: [.dictionary(key: "s", value: "v", entries)], timeout: .seconds(5))
            try BlueZTransport.check(filtered, is: "", context: "SetDiscoveryFilter on \(adapter)")
            applied[adapter] = wanted
            guard first else { return }
            let started = try await connection.call(
                destination: BlueZ.service, path: path, interface: BlueZ.adapterInterface, method: "StartDiscovery",
                timeout: .seconds(5))
            try BlueZTransport.check(started, is: "", context: "StartDiscovery on \(adapter)")
            logger.debug("discovery started", metadata: ["adapter": "\(adapter)"])
        } catch {
            if let index = users[adapter]?.lastIndex(of: filter) { users[adapter]?.remove(at: index) }
            if users[adapter]?.isEmpty ?? true { applied[adapter] = nil }
            if let error = error as? DBusError {
                throw BlueZErrors.transportError(error, context: "StartDiscovery on \(adapter)")
            }
            throw error
        }
    }

    func release(adapter: String, filter: DiscoveryFilter) async {
        if let index = users[adapter]?.lastIndex(of: filter) { users[adapter]?.remove(at: index) }
        guard users[adapter]?.isEmpty ?? true else { return }
        users[adapter] = nil
        applied[adapter] = nil
        guard let path = try? BlueZ.adapterPath(adapter) else { return }
        // Outside the caller's cancellation: a listener that was cancelled (the usual way to stop listening) must
        // still stop the discovery, or the next StartDiscovery of this connection is refused with InProgress.
        let connection = self.connection
        let stop = Task {
            try await connection.call(
                destination: BlueZ.service, path: path, interface: BlueZ.adapterInterface, method: "StopDiscovery",
                timeout: .seconds(5))
        }
        do {
            _ = try await stop.value
            logger.debug("discovery stopped", metadata: ["adapter": "\(adapter)"])
        } catch {
            // "No discovery started" after a bluetoothd restart, or the adapter went away: nothing to stop.
            logger.debug("StopDiscovery failed", metadata: ["adapter": "\(adapter)", "error": "\(error)"])
        }
    }
}
