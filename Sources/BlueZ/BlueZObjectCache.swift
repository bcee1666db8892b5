public import DBus
public import KeepAlive
public import Polling
public import Logging
import Basics
import Synchronization

/// One local copy of BlueZ's object tree for one D-Bus connection: `GetManagedObjects` once, then kept current
/// by `InterfacesAdded`/`InterfacesRemoved`/`PropertiesChanged` from org.bluez's current owner only.
///
/// When org.bluez leaves the bus (bluetoothd restarting or crashing — a crash sends no `InterfacesRemoved`) the
/// cache empties at once and every waiter and guarded operation fails with
/// `TransportError/Code/serviceRestarted`; when it comes back the tree is fetched again.
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

    /// What a wait's condition reads: the tree as it is at that instant (under the cache's lock).
    public struct TreeView {
        let state: State

        public func properties(_ path: ObjectPath, _ interface: String) -> BlueZProperties? {
            state.properties(path, interface)
        }

        public func hasObject(_ path: ObjectPath) -> Bool {
            state.hasObject(path)
        }

        /// The device at `path`, compact (no properties built: what a check on every signal reads).
        func device(_ path: ObjectPath) -> DeviceObject? {
            state.devices[path]
        }

        public func characteristic(_ uuid: BluetoothUUID, of device: ObjectPath) -> GattCharacteristic1? {
            BlueZObjectCache.characteristic(uuid, of: device, in: state)
        }

        /// The path of the characteristic with `uuid` below `device`, if resolved (no properties built).
        public func characteristicPath(_ uuid: BluetoothUUID, of device: ObjectPath) -> ObjectPath? {
            BlueZObjectCache.characteristicPath(uuid, of: device, in: state)
        }
    }

    struct Watcher {
        let check: @Sendable (TreeView) -> Check
        let continuation: CheckedContinuation<Void, any Error>
        /// The wait's deadline as a call on the clock's timer thread (a `TimerFDClock`), taken back when the wait
        /// ends otherwise; nil on other clocks, where a sleeping task keeps the deadline.
        var timer: TimerCall?

        /// Ends the wait: its deadline is taken back first, so it wakes nobody.
        func resume(with result: Result<Void, any Error>) {
            timer?.cancel()
            continuation.resume(with: result)
        }
    }

    /// What a guarded operation is told when its device vanishes or its link drops.
    struct Invalidator {
        let requireConnected: Bool
        let fire: @Sendable (TransportError) -> Void
    }

    struct State {
        /// The tree, except the devices' `Device1` and the GATT objects in bluetoothd's form.
        var objects: Objects = [:]
        /// Device path → its `Device1` (`DeviceObject`: the properties bluetoothd sends typed, the rest as received).
        var devices: [ObjectPath: DeviceObject] = [:]
        /// Device path → the GATT objects below it in bluetoothd's form, in path order (`GattObject`: 40 bytes
        /// each). A GATT object that form cannot keep exactly is in `objects` instead.
        var gatt: [ObjectPath: [GattObject]] = [:]
        var ready = false
        var watchers: [UInt64: Watcher] = [:]
        var readyWaiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
        var notifications: [ObjectPath: [UInt64: AsyncThrowingStream<[UInt8], any Error>.Continuation]] = [:]
        /// For the characteristics in `objects`: device path → characteristic UUID → characteristic path (lookups
        /// without scanning the tree).
        var characteristicIndex: [ObjectPath: [BluetoothUUID: ObjectPath]] = [:]
        /// For the descriptors in `objects`: characteristic path → descriptor paths.
        var descriptorIndex: [ObjectPath: Set<ObjectPath>] = [:]
        /// Device path → operations in flight on it.
        var invalidators: [ObjectPath: [UInt64: Invalidator]] = [:]
        /// Device path → how long its link was up, for the devices the transport connects (`LinkClock`).
        var links: [ObjectPath: LinkClock] = [:]
        /// Resyncs in flight: signals are buffered meanwhile and replayed in order on top of the snapshot.
        var syncing = 0
        var pending: [TreeChange] = []
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
    /// Devices heard advertising: a change of RSSI, ServiceData or ManufacturerData (with `DuplicateData`, one
    /// per advertisement), or a device that appears with one of them.
    let heardDevices = Broadcast<ObjectPath>(bufferSize: 16_384)

    public init(connection: DBusConnection, clock: any Clock<Duration> = TimerFDClock(), logger: Logger) {
        self.connection = connection
        self.logger = logger
        self.time = TimeBase(clock)
    }

    // MARK: Reading the tree

    public var isReady: Bool { state.withLock { $0.ready } }

    /// How many times the tree was fetched whole (1 at start, +1 per bluetoothd restart or resync).
    public var syncCount: Int { state.withLock { $0.syncs } }

    public func properties(_ path: ObjectPath, _ interface: String) -> BlueZProperties? {
        state.withLock { $0.properties(path, interface) }
    }

    public func adapters() -> [Adapter1] {
        state.withLock { $0.adapters() }
    }

    public func adapter(named name: String) -> Adapter1? {
        guard let path = try? BlueZ.adapterPath(name), let properties = properties(path, BlueZ.adapterInterface) else {
            return nil
        }
        return Adapter1(path: path, properties: properties)
    }

    /// The named adapter or, when it is missing, every adapter's name, read at one instant; `nil` while the tree
    /// is not there (org.bluez is not on the bus, or has just left it). One reading, so that a check never sees
    /// the tree ready and then, a moment later, emptied by bluetoothd leaving the bus (which would read as "no
    /// such adapter"). Every poll checks its adapter: the found case is one lookup, and the names are gathered
    /// only for the message of a missing adapter.
    func adapterReading(named name: String) -> (adapter: Adapter1?, names: [String])? {
        let path = try? BlueZ.adapterPath(name)
        return state.withLock { state in
            guard state.ready else { return nil }
            if let path, let properties = state.objects[path]?[BlueZ.adapterInterface] {
                return (Adapter1(path: path, properties: properties), [])
            }
            return (nil, state.adapters().map(\.name))
        }
    }

    public func devices(on adapter: String? = nil) -> [Device1] {
        let prefix = adapter.map { "/org/bluez/\($0)/" }
        return state.withLock { state in
            state.devices.compactMap { path, device in
                prefix == nil || path.rawValue.hasPrefix(prefix!)
                    ? Device1(path: path, properties: device.properties(at: path)) : nil
            }
        }.sorted { $0.path < $1.path }
    }

    public func device(_ path: ObjectPath) -> Device1? {
        properties(path, BlueZ.deviceInterface).map { Device1(path: path, properties: $0) }
    }

    /// The device at `path`, compact: for the transport's checks, which read a flag or two and need no
    /// properties built.
    func deviceObject(_ path: ObjectPath) -> DeviceObject? {
        state.withLock { $0.devices[path] }
    }

    /// The characteristics below a device (any service), in path order.
    public func characteristics(of device: ObjectPath) -> [GattCharacteristic1] {
        state.withLock { state in
            let compact = (state.gatt[device] ?? []).lazy.filter { $0.kind == .characteristic }.map {
                GattCharacteristic1(path: $0.key.path(below: device), properties: $0.properties(below: device))
            }
            let whole = (state.characteristicIndex[device] ?? [:]).values.compactMap { path in
                state.objects[path]?[BlueZ.gattCharacteristicInterface].map {
                    GattCharacteristic1(path: path, properties: $0)
                }
            }
            return Array(compact) + whole
        }.sorted { $0.path < $1.path }
    }

    /// The descriptors of a characteristic (`…/charXXXX/descYYYY`), in path order.
    public func descriptors(of characteristic: ObjectPath) -> [GattDescriptor1] {
        state.withLock { state in
            var found: [GattDescriptor1] = []
            if let (device, key) = GattObject.Key.locate(characteristic), key.kind == .characteristic {
                for object in state.gatt[device] ?? []
                where object.kind == .descriptor && object.key.service == key.service
                    && object.key.characteristic == key.characteristic
                {
                    found.append(
                        GattDescriptor1(
                            path: object.key.path(below: device), properties: object.properties(below: device)))
                }
            }
            for path in state.descriptorIndex[characteristic] ?? [] {
                if let properties = state.objects[path]?[BlueZ.gattDescriptorInterface] {
                    found.append(GattDescriptor1(path: path, properties: properties))
                }
            }
            return found
        }.sorted { $0.path < $1.path }
    }

    /// The characteristic with `uuid` below `device`, if resolved.
    func characteristic(_ uuid: BluetoothUUID, of device: ObjectPath) -> GattCharacteristic1? {
        state.withLock { Self.characteristic(uuid, of: device, in: $0) }
    }

    static func characteristic(_ uuid: BluetoothUUID, of device: ObjectPath, in state: State) -> GattCharacteristic1? {
        guard let path = characteristicPath(uuid, of: device, in: state),
            let properties = state.properties(path, BlueZ.gattCharacteristicInterface)
        else { return nil }
        return GattCharacteristic1(path: path, properties: properties)
    }

    /// The path of the characteristic with `uuid` below `device`, if resolved (what a read or write needs: no
    /// properties built).
    func characteristicPath(_ uuid: BluetoothUUID, of device: ObjectPath) -> ObjectPath? {
        state.withLock { Self.characteristicPath(uuid, of: device, in: $0) }
    }

    static func characteristicPath(_ uuid: BluetoothUUID, of device: ObjectPath, in state: State) -> ObjectPath? {
        if let object = state.gatt[device]?.first(where: { $0.kind == .characteristic && $0.uuid == uuid }) {
            return object.key.path(below: device)
        }
        guard let path = state.characteristicIndex[device]?[uuid],
            state.objects[path]?[BlueZ.gattCharacteristicInterface] != nil
        else {
            return nil
        }
        return path
    }

    /// Writes property values we learned by asking (a `Get` after a signal that never came: quirk 2).
    public func update(_ path: ObjectPath, _ interface: String, _ values: [String: DBusValue]) {
        let effects = state.withLock { state in
            var effects = Effects()
            let changed = values.map { PropertiesChange.Property(name: $0.key, value: $0.value) }
            guard state.change(path, interface, changed: changed, invalidated: []) else { return effects }
            if interface == BlueZ.deviceInterface, let connected = values["Connected"]?.boolean {
                state.noteLink(of: path, connected: connected) { time.now }
            }
            Self.evaluate(&state, effects: &effects, devices: [BlueZ.deviceOwning(path) ?? path])
            return effects
        }
        perform(effects)
    }

    public func battery(_ device: ObjectPath) -> Battery1? {
        properties(device, BlueZ.batteryInterface).map { Battery1(path: device, properties: $0) }
    }

    // MARK: Waiting on the tree

    /// Waits until BlueZ's tree has been fetched (org.bluez is on the bus).
    public func waitUntilReady(timeout: Duration) async throws {
        try await withDeadline(time.now + timeout, what: "org.bluez to be on the bus") {
            let id = self.state.withLock { $0.id() }
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    // Checked under the lock: a cancellation that came before we registered found nothing to
                    // resume, so it must be seen here (else this would wait forever).
                    let ready: Result<Void, any Error>? = self.state.withLock { state in
                        if state.ready { return .success(()) }
                        if Task.isCancelled { return .failure(CancellationError()) }
                        state.readyWaiters[id] = continuation
                        return nil
                    }
                    if let ready { continuation.resume(with: ready) }
                }
            } onCancel: {
                self.state.withLock { $0.readyWaiters.removeValue(forKey: id) }?.resume(throwing: CancellationError())
            }
        }
    }

    /// Waits until `check` says the tree is right, re-checking on every change; fails when `check` fails, when
    /// org.bluez leaves the bus, or at `deadline` (`TransportError/Code/timeout` naming `what`).
    public func wait(
        until deadline: KeepAliveInstant,
        for what: String,
        _ check: @escaping @Sendable (TreeView) -> Check
    ) async throws {
        // Already true (or already hopeless): no deadline task needed.
        let now: Check? = state.withLock { state in state.ready ? check(TreeView(state: state)) : nil }
        switch now {
        case .satisfied?: return
        case .failed(let error)?: throw error
        default: break
        }
        guard time.hasTimerThread else {
            return try await withDeadline(deadline, what: what) { try await self.waitWatching(check, deadline: nil) }
        }
        // Two waits a poll (ServicesResolved, Connected=false): a timer call instead of a task group with a
        // sleeping child saves three tasks each.
        try await waitWatching(check, deadline: (deadline, what))
    }

    /// Registers `check` as a watcher; with `deadline`, the timer thread ends the wait with
    /// `TransportError/Code/timeout` at that instant.
    private func waitWatching(
        _ check: @escaping @Sendable (TreeView) -> Check,
        deadline: (instant: KeepAliveInstant, what: String)?
    ) async throws {
        let id = state.withLock { $0.id() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let immediate: Result<Void, any Error>? = state.withLock { state in
                    guard state.ready else {
                        return .failure(TransportError(.serviceUnavailable, "org.bluez is not on the bus"))
                    }
                    switch check(TreeView(state: state)) {
                    case .satisfied: return .success(())
                    case .failed(let error): return .failure(error)
                    case .waiting:
                        // See waitUntilReady: a cancellation before registering must not be lost.
                        if Task.isCancelled { return .failure(CancellationError()) }
                        var watcher = Watcher(check: check, continuation: continuation)
                        if let deadline {
                            // Its call takes this lock: it cannot run before the watcher is registered.
                            watcher.timer = time.call(at: deadline.instant) { [weak self] in
                                self?.expire(id, what: deadline.what)
                            }
                        }
                        state.watchers[id] = watcher
                        return nil
                    }
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            state.withLock { $0.watchers.removeValue(forKey: id) }?.resume(with: .failure(CancellationError()))
        }
    }

    /// A watcher's deadline, on the timer thread.
    private func expire(_ id: UInt64, what: String) {
        state.withLock { $0.watchers.removeValue(forKey: id) }?.continuation.resume(
            throwing: TransportError(.timeout, "timed out waiting for \(what)"))
    }

    /// Runs `body`, throwing `TransportError/Code/timeout` if `deadline` passes first.
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

    /// Runs a D-Bus call on `device` so that it fails at once — not after a 25 s D-Bus timeout — when the
    /// device object disappears (`TransportError/Code/deviceVanished`), when the link drops and
    /// `requireConnected` is set (`TransportError/Code/notConnected`), or when org.bluez leaves the bus.
    ///
    /// `operation` makes its call with the `CallCancellation` it is given: that is what ends it, and only it (the
    /// caller's task is not cancelled). It runs in the caller's task: a task of its own per call cost a task's
    /// creation, scheduling and join on every Connect and ReadValue.
    public func guarded<T: Sendable>(
        device: ObjectPath,
        requireConnected: Bool,
        _ operation: (CallCancellation) async throws -> T
    ) async throws -> T {
        let guard_ = Guard()
        let id: UInt64 = state.withLock { state in
            let id = state.id()
            state.invalidators[device, default: [:]][id] = Invalidator(
                requireConnected: requireConnected, fire: guard_.invalidate)
            return id
        }
        // The device may have gone (or org.bluez left) before we were registered.
        if let early = state.withLock({ Self.invalidation(of: device, requireConnected: requireConnected, in: $0) }) {
            guard_.invalidate(early)
        }
        defer { state.withLock { $0.removeInvalidator(id, of: device) } }
        do {
            return try await operation(guard_.cancellation)
        } catch {
            if let reason = guard_.reason { throw reason }
            throw error
        }
    }

    /// Why a guarded call was ended, and what ends it.
    final class Guard: Sendable {
        let cancellation = CallCancellation()
        private let why = Mutex<TransportError?>(nil)

        var reason: TransportError? { why.withLock { $0 } }

        /// The first reason wins; the call ends.
        @Sendable func invalidate(_ error: TransportError) {
            why.withLock { $0 = $0 ?? error }
            cancellation.cancel()
        }
    }

    /// Why operations on `device` can no longer succeed, if they can't.
    static func invalidation(of device: ObjectPath, requireConnected: Bool, in state: State) -> TransportError? {
        guard state.ready else { return TransportError(.serviceRestarted, "org.bluez left the bus") }
        guard let object = state.devices[device] else {
            return TransportError(.deviceVanished, "device \(device) disappeared")
        }
        if requireConnected, object.flag(.connected) == false {
            return TransportError(.notConnected, "Not connected: the link to \(device) dropped")
        }
        return nil
    }
}
