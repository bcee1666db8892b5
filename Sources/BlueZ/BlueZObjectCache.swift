public import DBus
public import KeepAlive
public import Logging
import Locking

/// One local copy of BlueZ's object tree for one D-Bus connection: `GetManagedObjects` once, then kept current
/// by `InterfacesAdded`/`InterfacesRemoved`/`PropertiesChanged` from org.bluez's current owner only.
///
/// When org.bluez leaves the bus (bluetoothd restarting or crashing — a crash sends no `InterfacesRemoved`) the
/// cache empties at once and every waiter and guarded operation fails with
/// ``TransportError/Code/serviceRestarted``; when it comes back the tree is fetched again.
///
/// ```swift
/// let cache = BlueZObjectCache(connection: connection, logger: logger)
/// Task { try await cache.run() }
/// try await cache.waitUntilReady(timeout: .seconds(5))
/// let adapters = cache.adapters()
/// ```
public final class BlueZObjectCache: Sendable {
    public typealias Objects = [ObjectPath: [String: BlueZProperties]]

    /// What a wait's condition says about the tree as it is now.
    public enum Check: Sendable {
        case satisfied
        case waiting
        case failed(TransportError)
    }

    struct Watcher {
        let check: @Sendable (Objects) -> Check
        let continuation: CheckedContinuation<Void, any Error>
    }

    struct State {
        var objects: Objects = [:]
        var ready = false
        var watchers: [UInt64: Watcher] = [:]
        var readyWaiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
        var notifications: [ObjectPath: [UInt64: AsyncThrowingStream<[UInt8], any Error>.Continuation]] = [:]
        var nextID: UInt64 = 0
        var syncs = 0

        mutating func id() -> UInt64 {
            nextID += 1
            return nextID
        }
    }

    public let connection: DBusConnection
    let logger: Logger
    let time: TimeBase
    let state = Locked(State())
    /// Paths of devices that appeared or changed (for discovery streams).
    let deviceChanges = Broadcast<ObjectPath>(bufferSize: 16_384)

    public init(connection: DBusConnection, clock: any Clock<Duration> = ContinuousClock(), logger: Logger) {
        self.connection = connection
        self.logger = logger
        self.time = TimeBase(clock)
    }

    // MARK: Reading the tree

    public var isReady: Bool { state.withLock { $0.ready } }

    /// How many times the tree was fetched whole (1 at start, +1 per bluetoothd restart or resync).
    public var syncCount: Int { state.withLock { $0.syncs } }

    public func properties(_ path: ObjectPath, _ interface: String) -> BlueZProperties? {
        state.withLock { $0.objects[path]?[interface] }
    }

    public func adapters() -> [Adapter1] {
        objects(implementing: BlueZ.adapterInterface).map { Adapter1(path: $0.0, properties: $0.1) }
    }

    public func adapter(named name: String) -> Adapter1? {
        guard let path = try? BlueZ.adapterPath(name), let properties = properties(path, BlueZ.adapterInterface) else { return nil }
        return Adapter1(path: path, properties: properties)
    }

    public func devices(on adapter: String? = nil) -> [Device1] {
        let prefix = adapter.map { "/org/bluez/\($0)/" }
        return objects(implementing: BlueZ.deviceInterface)
            .filter { prefix == nil || $0.0.rawValue.hasPrefix(prefix!) }
            .map { Device1(path: $0.0, properties: $0.1) }
    }

    public func device(_ path: ObjectPath) -> Device1? {
        properties(path, BlueZ.deviceInterface).map { Device1(path: path, properties: $0) }
    }

    /// The characteristics below a device (any service), in path order.
    public func characteristics(of device: ObjectPath) -> [GattCharacteristic1] {
        objects(implementing: BlueZ.gattCharacteristicInterface)
            .filter { $0.0.isDescendant(of: device) }
            .map { GattCharacteristic1(path: $0.0, properties: $0.1) }
    }

    /// The characteristic with `uuid` below `device`, if resolved.
    public func characteristic(_ uuid: BluetoothUUID, of device: ObjectPath) -> GattCharacteristic1? {
        Self.characteristic(uuid, of: device, in: state.withLock { $0.objects })
    }

    static func characteristic(_ uuid: BluetoothUUID, of device: ObjectPath, in objects: Objects) -> GattCharacteristic1? {
        for (path, interfaces) in objects where path.isDescendant(of: device) {
            if let properties = interfaces[BlueZ.gattCharacteristicInterface],
                properties.uuid("UUID") == uuid
            {
                return GattCharacteristic1(path: path, properties: properties)
            }
        }
        return nil
    }

    /// Writes property values we learned by asking (a `Get` after a signal that never came: quirk 2).
    public func update(_ path: ObjectPath, _ interface: String, _ values: [String: DBusValue]) {
        let done = state.withLock { state in
            guard state.objects[path]?[interface] != nil else { return [(Watcher, Result<Void, any Error>)]() }
            for (name, value) in values { state.objects[path]![interface]!.values[name] = value }
            return evaluateWatchers(&state)
        }
        resume(done)
    }

    public func battery(_ device: ObjectPath) -> Battery1? {
        properties(device, BlueZ.batteryInterface).map { Battery1(path: device, properties: $0) }
    }

    private func objects(implementing interface: String) -> [(ObjectPath, BlueZProperties)] {
        state.withLock { state in
            state.objects.compactMap { path, interfaces in interfaces[interface].map { (path, $0) } }
        }.sorted { $0.0 < $1.0 }
    }

    // MARK: Waiting on the tree

    /// Waits until BlueZ's tree has been fetched (org.bluez is on the bus).
    public func waitUntilReady(timeout: Duration) async throws {
        try await withDeadline(time.now + timeout, what: "org.bluez to be on the bus") {
            let id = self.state.withLock { $0.id() }
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let ready = self.state.withLock { state in
                        if state.ready { return true }
                        state.readyWaiters[id] = continuation
                        return false
                    }
                    if ready { continuation.resume() }
                }
            } onCancel: {
                self.state.withLock { $0.readyWaiters.removeValue(forKey: id) }?.resume(throwing: CancellationError())
            }
        }
    }

    /// Waits until `check` says the tree is right, re-checking on every change; fails when `check` fails, when
    /// org.bluez leaves the bus, or at `deadline` (``TransportError/Code/timeout`` naming `what`).
    public func wait(
        until deadline: KeepAliveInstant,
        for what: String,
        _ check: @escaping @Sendable (Objects) -> Check
    ) async throws {
        try await withDeadline(deadline, what: what) {
            try await self.waitWithoutDeadline(check)
        }
    }

    private func waitWithoutDeadline(_ check: @escaping @Sendable (Objects) -> Check) async throws {
        let id = state.withLock { $0.id() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let immediate: Result<Void, any Error>? = state.withLock { state in
                    guard state.ready else {
                        return .failure(TransportError(.serviceUnavailable, "org.bluez is not on the bus"))
                    }
                    switch check(state.objects) {
                    case .satisfied: return .success(())
                    case .failed(let error): return .failure(error)
                    case .waiting:
                        state.watchers[id] = Watcher(check: check, continuation: continuation)
                        return nil
                    }
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            state.withLock { $0.watchers.removeValue(forKey: id) }?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Runs `body`, throwing ``TransportError/Code/timeout`` if `deadline` passes first.
    func withDeadline<T: Sendable>(
        _ deadline: KeepAliveInstant,
        what: String,
        _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let time = self.time
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await time.sleep(until: deadline)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else {
                throw TransportError(.timeout, "timed out waiting for \(what)")
            }
            return value
        }
    }

    /// Runs a D-Bus operation on `device` so that it fails at once — not after a 25 s D-Bus timeout — when the
    /// device object disappears (``TransportError/Code/deviceVanished``), when the link drops and
    /// `requireConnected` is set (``TransportError/Code/notConnected``), or when org.bluez leaves the bus.
    public func guarded<T: Sendable>(
        device: ObjectPath,
        requireConnected: Bool,
        _ operation: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let invalidation: @Sendable (Objects) -> Check = { objects in
            guard let properties = objects[device]?[BlueZ.deviceInterface] else {
                return .failed(TransportError(.deviceVanished, "device \(device) disappeared"))
            }
            if requireConnected, properties.bool("Connected") == false {
                return .failed(TransportError(.notConnected, "Not connected: the link to \(device) dropped"))
            }
            return .waiting
        }
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await operation() }
            group.addTask {
                try await self.waitWithoutDeadline(invalidation)
                return nil  // never satisfied: it only ever fails
            }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let value = result { return value }
            }
            throw CancellationError()
        }
    }
}
