public import DBus
import KeepAlive
import Polling

extension BlueZObjectCache {
    /// Keeps the cache current until the task is cancelled or the bus connection is lost (then it throws,
    /// after failing every waiter with `TransportError/Code/serviceUnavailable`).
    ///
    /// Signals from org.bluez are applied on the connection's thread as they arrive (no task hop per signal);
    /// while the whole tree is being fetched they are buffered and replayed, in order, on top of the snapshot —
    /// so a snapshot can never overwrite a newer change.
    public func run() async throws {
        let owners = try await connection.nameOwnerChanges(for: BlueZ.service)
        let handler = try await connection.addSignalHandler(
            matching: MatchRule(sender: BlueZ.service),
            reading: { [weak self] signal in self?.handle(signal) },
            onEnd: { [weak self] error in
                self?.serviceLost(reason: "the D-Bus connection was lost: \(error)", code: .serviceUnavailable)
            }
        )
        defer { connection.removeSignalHandler(handler) }
        await resync()
        do {
            for try await change in owners {
                if change.newOwner == nil || change.newOwner == "" {
                    serviceLost(reason: "org.bluez left the bus (bluetoothd stopped or crashed)")
                } else {
                    if change.oldOwner != nil, change.oldOwner != "" {
                        serviceLost(reason: "org.bluez changed owner (bluetoothd restarted)")
                    }
                    logger.info(
                        "org.bluez is on the bus; fetching its object tree",
                        metadata: ["owner": "\(change.newOwner ?? "")"])
                    await resync()
                }
            }
        } catch {
            serviceLost(reason: "the D-Bus connection was lost: \(error)", code: .serviceUnavailable)
            throw error
        }
        serviceLost(reason: "stopped", code: .serviceUnavailable)
    }

    /// Fetches the whole tree again (at start, when org.bluez returns, or to look for objects a signal may have
    /// raced with).
    public func resync() async {
        state.withLock { $0.syncing += 1 }
        // Filed as the reply is read: the whole tree is never decoded (at 10,000 devices that was the peak).
        var fetched = State()
        do {
            try await connection.getManagedObjects(destination: BlueZ.service, timeout: .seconds(10)) {
                path, interface, properties in
                if path.isInNamespace("/org/bluez"), let name = BlueZ.cachedInterface(interface) {
                    fetched.store(path, name, properties)
                }
            }
        } catch {
            let pending = state.withLock { state in
                state.syncing -= 1
                return state.syncing == 0 ? state.takePending() : []
            }
            for change in pending { handle(change) }
            if let error = error as? DBusError,
                error.name == BlueZErrors.Name.serviceUnknown || error.name == BlueZErrors.Name.nameHasNoOwner
            {
                logger.warning("org.bluez is not on the bus: is bluetoothd running?")
            } else {
                logger.warning("could not fetch BlueZ's object tree", metadata: ["error": "\(error)"])
            }
            return
        }
        // A device's path is in `objects` too when it has another interface (Battery1): counted once.
        let objects =
            fetched.objects.count + fetched.devices.keys.count { fetched.objects[$0] == nil }
            + fetched.gatt.values.reduce(0) { $0 + $1.count }
        let (effects, readyWaiters) = state.withLock { state in
            var effects = Effects()
            state.objects = fetched.objects
            state.devices = fetched.devices
            state.gatt = fetched.gatt
            state.characteristicIndex = fetched.characteristicIndex
            state.descriptorIndex = fetched.descriptorIndex
            state.ready = true
            state.syncs += 1
            state.syncing -= 1
            if state.syncing == 0 {
                for change in state.takePending() { Self.apply(change, to: &state, effects: &effects, time: time) }
            }
            Self.evaluate(&state, effects: &effects, devices: nil)
            defer { state.readyWaiters = [:] }
            return (effects, Array(state.readyWaiters.values))
        }
        for waiter in readyWaiters { waiter.resume() }
        perform(effects)
        logger.debug("BlueZ object tree fetched", metadata: ["objects": "\(objects)"])
    }

    /// One signal from org.bluez, on the connection's thread: read straight from the message (only the three
    /// signals the tree follows, and without building generic values first).
    func handle(_ signal: ReceivedSignal) {
        guard let change = TreeChange(signal) else { return }
        handle(change)
    }

    private func handle(_ change: TreeChange) {
        let effects: Effects? = state.withLock { state in
            guard state.syncing == 0 else {
                state.pending.append(change)
                return nil
            }
            var effects = Effects()
            Self.apply(change, to: &state, effects: &effects, time: time)
            return effects
        }
        if let effects { perform(effects) }
    }

    /// What one signal from org.bluez says about the tree.
    enum TreeChange: Sendable {
        case interfacesAdded(ObjectPath, [(name: String, properties: [String: DBusValue])])
        case interfacesRemoved(ObjectPath, [String])
        case propertiesChanged(ObjectPath, PropertiesChange)
        /// One of these three whose arguments are not what the specification says: logged, never applied.
        case malformed(member: String, path: ObjectPath, signature: DBusSignature)

        /// Nil for a signal the tree does not follow.
        init?(_ signal: ReceivedSignal) {
            do {
                switch (signal.interface, signal.member) {
                case (BlueZ.objectManagerInterface, "InterfacesAdded"):
                    let (path, interfaces) = try signal.interfacesAdded()
                    self = .interfacesAdded(path, interfaces)
                case (BlueZ.objectManagerInterface, "InterfacesRemoved"):
                    let (path, interfaces) = try signal.interfacesRemoved()
                    self = .interfacesRemoved(path, interfaces)
                case (BlueZ.propertiesInterface, "PropertiesChanged"):
                    self = .propertiesChanged(signal.path, try signal.propertiesChanged())
                default:
                    return nil
                }
            } catch {
                self = .malformed(
                    member: "\(signal.interface).\(signal.member)", path: signal.path, signature: signal.signature)
            }
        }
    }

    /// What applying signals decided, carried out once the lock is released.
    struct Effects {
        var notifications: [(AsyncThrowingStream<[UInt8], any Error>.Continuation, [UInt8])] = []
        var finished: [(AsyncThrowingStream<[UInt8], any Error>.Continuation, TransportError)] = []
        var changedDevices: [ObjectPath] = []
        /// Devices whose change was an advertisement heard: RSSI or advertising data (a Connected is not).
        var heardDevices: [ObjectPath] = []
        var watchers: [(Watcher, Result<Void, any Error>)] = []
        var invalidations: [(@Sendable (TransportError) -> Void, TransportError)] = []
        var malformed: [(member: String, path: ObjectPath, signature: DBusSignature)] = []
    }

    /// Applies one change to the tree; `time` stamps the `Connected` changes of the devices whose link is timed.
    static func apply(_ change: TreeChange, to state: inout State, effects: inout Effects, time: TimeBase) {
        switch change {
        case .interfacesAdded(let path, let interfaces):
            for (interface, properties) in interfaces {
                if let interface = BlueZ.cachedInterface(interface) { state.store(path, interface, properties) }
            }
            if let device = interfaces.first(where: { $0.name == BlueZ.deviceInterface }) {
                effects.changedDevices.append(path)
                if device.properties.contains(where: { BlueZ.heardProperties.contains($0.key) }) {
                    effects.heardDevices.append(path)
                }
                if !state.links.isEmpty {
                    state.noteLink(of: path, connected: state.devices[path]?.flag(.connected) == true) { time.now }
                }
            }
            evaluate(&state, effects: &effects, devices: [BlueZ.deviceOwning(path) ?? path])
        case .interfacesRemoved(let path, let interfaces):
            for interface in interfaces { state.remove(path, interface) }
            if interfaces.contains(BlueZ.deviceInterface) {
                // No object, no link: bluetoothd removes a device only once it is disconnected.
                state.noteLink(of: path, connected: false) { time.now }
                state.removeGATT(of: path)
                finishNotifications(
                    below: path, TransportError(.deviceVanished, "device \(path) disappeared"), &state, &effects)
            }
            evaluate(&state, effects: &effects, devices: [BlueZ.deviceOwning(path) ?? path])
        case .propertiesChanged(let path, let change):
            let interface = change.interface
            // Only objects we know: a PropertiesChanged racing an InterfacesRemoved must not resurrect it.
            guard state.change(path, interface, changed: change.changed, invalidated: change.invalidated) else {
                return
            }
            if interface == BlueZ.gattCharacteristicInterface, let raw = change["Value"]?.unwrappingVariants {
                guard let value = raw.bytes else {
                    // BlueZ's Value is always `ay`: anything else ends the notifications with a typed error
                    // instead of being dropped in silence.
                    let error = TransportError(
                        .protocolError, "Value of \(path) changed to a '\(raw.signature)', not an 'ay'")
                    for target in state.notifications[path]?.values ?? [:].values {
                        effects.finished.append((target, error))
                    }
                    state.notifications[path] = nil
                    return
                }
                for target in state.notifications[path]?.values ?? [:].values {
                    effects.notifications.append((target, value))
                }
                return  // a notification changes nothing anyone waits on
            }
            if interface == BlueZ.deviceInterface {
                effects.changedDevices.append(path)
                if change.changed.contains(where: { BlueZ.heardProperties.contains($0.name) }) {
                    effects.heardDevices.append(path)
                }
                if let connected = change["Connected"]?.unwrappingVariants.boolean {
                    state.noteLink(of: path, connected: connected) { time.now }
                    if !connected {
                        finishNotifications(
                            below: path, TransportError(.notConnected, "Not connected: the link to \(path) dropped"),
                            &state, &effects)
                    }
                }
            }
            evaluate(&state, effects: &effects, devices: [BlueZ.deviceOwning(path) ?? path])
        case .malformed(let member, let path, let signature):
            effects.malformed.append((member, path, signature))
        }
    }

    /// Re-checks the watchers, and the in-flight operations of `devices` (all devices when `nil`).
    static func evaluate(_ state: inout State, effects: inout Effects, devices: [ObjectPath]?) {
        for (id, watcher) in state.watchers {
            switch watcher.check(BlueZObjectCache.TreeView(state: state)) {
            case .waiting: continue
            case .satisfied: effects.watchers.append((watcher, .success(())))
            case .failed(let error): effects.watchers.append((watcher, .failure(error)))
            }
            state.watchers.removeValue(forKey: id)
        }
        for device in devices ?? Array(state.invalidators.keys) {
            guard let operations = state.invalidators[device], !operations.isEmpty else { continue }
            for (id, operation) in operations {
                if let error = invalidation(of: device, requireConnected: operation.requireConnected, in: state) {
                    effects.invalidations.append((operation.fire, error))
                    state.removeInvalidator(id, of: device)
                }
            }
        }
    }

    /// Ends the notification streams below `device` with `error`, made only when there is one (every poll's
    /// Connected=false comes here, nearly always with no stream open).
    private static func finishNotifications(
        below device: ObjectPath, _ error: @autoclosure () -> TransportError, _ state: inout State,
        _ effects: inout Effects
    ) {
        guard !state.notifications.isEmpty else { return }
        let paths = state.notifications.keys.filter { $0.isDescendant(of: device) }
        guard !paths.isEmpty else { return }
        let error = error()
        for path in paths {
            for target in state.notifications[path]?.values ?? [:].values { effects.finished.append((target, error)) }
            state.notifications[path] = nil
        }
    }

    func perform(_ effects: Effects) {
        for (target, value) in effects.notifications { target.yield(value) }
        for (target, error) in effects.finished { target.finish(throwing: error) }
        for (watcher, result) in effects.watchers { watcher.resume(with: result) }
        for (fire, error) in effects.invalidations { fire(error) }
        if deviceChanges.hasSubscribers { for path in effects.changedDevices { deviceChanges.publish(path) } }
        if heardDevices.hasSubscribers { for path in effects.heardDevices { heardDevices.publish(path) } }
        for signal in effects.malformed {
            logger.warning(
                "ignoring a malformed signal from org.bluez",
                metadata: ["member": "\(signal.member)", "path": "\(signal.path)", "signature": "\(signal.signature)"]
            )
        }
    }

    /// Empties the cache and fails everything waiting on it.
    func serviceLost(reason: String, code: TransportError.Code = .serviceRestarted) {
        let error = TransportError(code, reason)
        let (watchers, streams, invalidators) = state.withLock { state in
            state.objects = [:]
            state.devices = [:]
            state.gatt = [:]
            state.characteristicIndex = [:]
            state.descriptorIndex = [:]
            state.ready = false
            defer {
                state.watchers = [:]
                state.notifications = [:]
                state.invalidators = [:]
            }
            return (
                Array(state.watchers.values), state.notifications.values.flatMap(\.values),
                state.invalidators.values.flatMap(\.values)
            )
        }
        if !watchers.isEmpty || !invalidators.isEmpty || code == .serviceRestarted {
            logger.warning(
                "BlueZ object cache emptied",
                metadata: ["reason": "\(reason)", "failed_operations": "\(watchers.count + invalidators.count)"]
            )
        }
        for watcher in watchers { watcher.resume(with: .failure(error)) }
        for stream in streams { stream.finish(throwing: error) }
        for operation in invalidators { operation.fire(error) }
    }

    // MARK: Notifications

    /// A stream of the `Value` changes of one characteristic (BlueZ's notifications). Ends with an error when
    /// the device disconnects or vanishes, or org.bluez leaves the bus.
    public func notifications(of characteristic: ObjectPath) -> (
        stream: AsyncThrowingStream<[UInt8], any Error>, cancel: @Sendable () -> Void
    ) {
        let (stream, continuation) = AsyncThrowingStream<[UInt8], any Error>.makeStream(
            bufferingPolicy: .bufferingNewest(1_024))
        let id = state.withLock { state in
            let id = state.id()
            state.notifications[characteristic, default: [:]][id] = continuation
            return id
        }
        let cancel: @Sendable () -> Void = { [weak self] in
            _ = self?.state.withLock { $0.notifications[characteristic]?.removeValue(forKey: id) }
        }
        continuation.onTermination = { _ in cancel() }
        return (stream, cancel)
    }
}

extension BlueZObjectCache.State {
    mutating func takePending() -> [BlueZObjectCache.TreeChange] {
        defer { pending = [] }
        return pending
    }
}
