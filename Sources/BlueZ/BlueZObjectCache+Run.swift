public import DBus
import KeepAlive
import Logging
import Synchronization

extension BlueZObjectCache {
    /// Keeps the cache current until the task is cancelled or the bus connection is lost (then it throws,
    /// after failing every waiter with ``TransportError/Code/serviceUnavailable``).
    public func run() async throws {
        let owners = try await connection.nameOwnerChanges(for: BlueZ.service)
        let signals = try await connection.signals(matching: MatchRule(sender: BlueZ.service))
        await resync()
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await change in owners {
                        if change.newOwner == nil || change.newOwner == "" {
                            self.serviceLost(reason: "org.bluez left the bus (bluetoothd stopped or crashed)")
                        } else {
                            if change.oldOwner != nil, change.oldOwner != "" {
                                self.serviceLost(reason: "org.bluez changed owner (bluetoothd restarted)")
                            }
                            self.logger.info("org.bluez is on the bus; fetching its object tree", metadata: ["owner": "\(change.newOwner ?? "")"])
                            await self.resync()
                        }
                    }
                }
                group.addTask {
                    for try await signal in signals {
                        self.apply(signal)
                    }
                }
                try await group.next()
                group.cancelAll()
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
        do {
            let tree = try await connection.getManagedObjects(destination: BlueZ.service, timeout: .seconds(10))
            var objects: Objects = [:]
            objects.reserveCapacity(tree.count)
            for (path, interfaces) in tree where path.isInNamespace("/org/bluez") {
                objects[path] = interfaces.mapValues { BlueZProperties($0) }
            }
            let (waiters, ready) = state.withLock { state in
                state.objects = objects
                state.ready = true
                state.syncs += 1
                defer { state.readyWaiters = [:] }
                return (Array(state.readyWaiters.values), evaluateWatchers(&state))
            }
            for waiter in waiters { waiter.resume() }
            resume(ready)
            logger.debug("BlueZ object tree fetched", metadata: ["objects": "\(objects.count)"])
        } catch let error as DBusError where error.name == BlueZErrors.Name.serviceUnknown || error.name == BlueZErrors.Name.nameHasNoOwner {
            logger.warning("org.bluez is not on the bus: is bluetoothd running?")
        } catch {
            logger.warning("could not fetch BlueZ's object tree", metadata: ["error": "\(error)"])
        }
    }

    /// Applies one signal from org.bluez.
    func apply(_ signal: DBusSignal) {
        switch (signal.interface, signal.member) {
        case (BlueZ.objectManagerInterface, "InterfacesAdded"):
            guard let path = signal.arguments.first?.objectPath,
                let interfaces = try? signal.arguments.dropFirst().first?.decode([String: [String: DBusValue]].self)
            else { return logMalformed(signal) }
            mutate { objects in
                for (interface, properties) in interfaces {
                    objects[path, default: [:]][interface] = BlueZProperties(properties)
                }
            }
            if interfaces[BlueZ.deviceInterface] != nil { deviceChanges.publish(path) }
        case (BlueZ.objectManagerInterface, "InterfacesRemoved"):
            guard let path = signal.arguments.first?.objectPath,
                let interfaces = try? signal.arguments.dropFirst().first?.decode([String].self)
            else { return logMalformed(signal) }
            mutate { objects in
                for interface in interfaces { objects[path]?[interface] = nil }
                if objects[path]?.isEmpty ?? false { objects[path] = nil }
            }
            if interfaces.contains(BlueZ.deviceInterface) {
                finishNotifications(below: path, TransportError(.deviceVanished, "device \(path) disappeared"))
            }
        case (BlueZ.propertiesInterface, "PropertiesChanged"):
            guard let interface = signal.arguments.first?.string,
                let changed = try? signal.arguments.dropFirst().first?.decode([String: DBusValue].self)
            else { return logMalformed(signal) }
            let invalidated = (try? signal.arguments.dropFirst(2).first?.decode([String].self)) ?? []
            let path = signal.path
            mutate { objects in
                // Only objects we know: a PropertiesChanged racing an InterfacesRemoved must not resurrect it.
                guard objects[path]?[interface] != nil else { return }
                for (name, value) in changed { objects[path]![interface]!.values[name] = value }
                for name in invalidated { objects[path]![interface]!.values[name] = nil }
            }
            if interface == BlueZ.gattCharacteristicInterface, let value = changed["Value"]?.unwrappingVariants.bytes {
                deliverNotification(value, from: path)
            }
            if interface == BlueZ.deviceInterface, deviceChanges.hasSubscribers { deviceChanges.publish(path) }
            if interface == BlueZ.deviceInterface, changed["Connected"]?.unwrappingVariants.boolean == false {
                finishNotifications(below: path, TransportError(.notConnected, "Not connected: the link to \(path) dropped"))
            }
        default:
            break
        }
    }

    private func logMalformed(_ signal: DBusSignal) {
        logger.warning(
            "ignoring a malformed signal from org.bluez",
            metadata: ["member": "\(signal.interface).\(signal.member)", "path": "\(signal.path)", "signature": "\(signal.arguments.signature)"]
        )
    }

    private func mutate(_ change: (inout Objects) -> Void) {
        let ready = state.withLock { state in
            change(&state.objects)
            return evaluateWatchers(&state)
        }
        resume(ready)
    }

    /// Empties the cache and fails everything waiting on it.
    func serviceLost(reason: String, code: TransportError.Code = .serviceRestarted) {
        let error = TransportError(code, reason)
        let (watchers, streams): ([Watcher], [AsyncThrowingStream<[UInt8], any Error>.Continuation]) = state.withLock { state in
            state.objects = [:]
            state.ready = false
            defer {
                state.watchers = [:]
                state.notifications = [:]
            }
            return (Array(state.watchers.values), state.notifications.values.flatMap(\.values))
        }
        if !watchers.isEmpty || code == .serviceRestarted {
            logger.warning("BlueZ object cache emptied", metadata: ["reason": "\(reason)", "failed_waiters": "\(watchers.count)"])
        }
        for watcher in watchers { watcher.continuation.resume(throwing: error) }
        for stream in streams { stream.finish(throwing: error) }
    }

    /// Re-checks every watcher; returns those whose check completed (removed from the state).
    func evaluateWatchers(_ state: inout State) -> [(Watcher, Result<Void, any Error>)] {
        var done: [(Watcher, Result<Void, any Error>)] = []
        for (id, watcher) in state.watchers {
            switch watcher.check(state.objects) {
            case .waiting: continue
            case .satisfied: done.append((watcher, .success(())))
            case .failed(let error): done.append((watcher, .failure(error)))
            }
            state.watchers.removeValue(forKey: id)
        }
        return done
    }

    func resume(_ done: [(Watcher, Result<Void, any Error>)]) {
        for (watcher, result) in done { watcher.continuation.resume(with: result) }
    }

    // MARK: Notifications

    /// A stream of the `Value` changes of one characteristic (BlueZ's notifications). Ends with an error when
    /// the device disconnects or vanishes, or org.bluez leaves the bus.
    public func notifications(of characteristic: ObjectPath) -> (stream: AsyncThrowingStream<[UInt8], any Error>, cancel: @Sendable () -> Void) {
        let (stream, continuation) = AsyncThrowingStream<[UInt8], any Error>.makeStream(bufferingPolicy: .bufferingNewest(1_024))
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

    private func deliverNotification(_ value: [UInt8], from path: ObjectPath) {
        let targets = state.withLock { $0.notifications[path].map { Array($0.values) } ?? [] }
        for target in targets { target.yield(value) }
    }

    private func finishNotifications(below device: ObjectPath, _ error: TransportError) {
        let targets = state.withLock { state in
            let paths = state.notifications.keys.filter { $0.isDescendant(of: device) }
            defer { for path in paths { state.notifications[path] = nil } }
            return paths.flatMap { state.notifications[$0].map { Array($0.values) } ?? [] }
        }
        for target in targets { target.finish(throwing: error) }
    }
}
