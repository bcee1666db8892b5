import DBus
import Basics

// GattCharacteristic1 / GattDescriptor1 behaviour: shared reads, writes, notify sessions per client.

extension SimulatorEngine {
    private enum ReadPlan {
        case join(Promise<[UInt8]>)
        case lead(Promise<[UInt8]>, link: Int, faults: FaultState)
    }

    func readValue(_ call: DBusMethodCall) async throws -> [DBusValue] {
        count("ReadValue")
        let path = call.path
        let options = try call.arguments.decode([String: DBusValue].self)
        let offset = try Self.option(options, "offset", as: UInt16.self) ?? 0
        _ = try Self.option(options, "mtu", as: UInt16.self)
        _ = try Self.option(options, "device", as: ObjectPath.self)
        let plan = try model.withLock { model -> ReadPlan in
            guard var characteristic = model.characteristics[path],
                let device = model.devices[characteristic.devicePath],
                device.gattExported
            else { throw BlueZError.unknownObject(path) }
            guard characteristic.configuration.flags.contains("read") else { throw BlueZError.readNotPermitted }
            guard device.connected else { throw BlueZError.notConnected }
            if device.faults.inProgress { throw BlueZError.inProgress }
            if let pending = characteristic.pendingRead {
                // One ATT read at a time: the same request shares its answer, another one is refused.
                guard pending.offset == offset else { throw BlueZError.inProgress }
                return .join(pending.promise)
            }
            let promise = Promise<[UInt8]>()
            characteristic.pendingRead = (offset, promise)
            model.characteristics[path] = characteristic
            return .lead(promise, link: device.link, faults: device.faults)
        }
        switch plan {
        case .join(let promise):
            return [.bytes(try await promise.value())]
        case .lead(let promise, let link, let faults):
            if faults.readHang {
                schedule(after: configuration.latencies.attTimeout) { [self] in
                    await attTimeout(path, promise: promise, link: link)
                }
            } else if let code = faults.attError {
                schedule(after: configuration.latencies.read) { [self] in
                    guard clearPendingRead(path, promise) else { return }
                    promise.complete(.failure(BlueZError.attError(code)))
                }
            } else {
                schedule(after: configuration.latencies.read) { [self] in
                    await finishRead(path, promise: promise, offset: offset)
                }
            }
            return [.bytes(try await promise.value())]
        }
    }

    private func clearPendingRead(_ path: ObjectPath, _ promise: Promise<[UInt8]>) -> Bool {
        model.withLock { model in
            guard model.characteristics[path]?.pendingRead?.promise === promise else { return false }
            model.characteristics[path]?.pendingRead = nil
            return true
        }
    }

    private func finishRead(_ path: ObjectPath, promise: Promise<[UInt8]>, offset: UInt16) async {
        let value = model.withLock { model -> Result<[UInt8], DBusError>? in
            guard var characteristic = model.characteristics[path],
                characteristic.pendingRead?.promise === promise
            else { return nil }
            characteristic.pendingRead = nil
            let link = model.devices[characteristic.devicePath]?.link ?? 0
            let full: [UInt8]
            if let role = characteristic.configuration.role,
                let answer = model.answer(role, device: characteristic.devicePath, link: link)
            {
                full = answer
            } else if let required = characteristic.configuration.requiredWrite,
                !model.requiredWriteDone(required, device: characteristic.devicePath)
            {
                full = required.placeholder
            } else {
                full =
                    characteristic.written(onLink: link)
                    ?? characteristic.configuration.value.value(characteristic.readSequence)
                characteristic.readSequence += 1
            }
            guard Int(offset) <= full.count else {
                model.characteristics[path] = characteristic
                return .failure(BlueZError.attError(0x07))
            }
            characteristic.value = Array(full[Int(offset)...])
            model.characteristics[path] = characteristic
            return .success(characteristic.value)
        }
        guard let value else { return }
        if case .success(let bytes) = value {
            // The Value PropertiesChanged leaves before the reply.
            await emitChanged(path, Self.characteristicInterface, ["Value": .bytes(bytes)])
        }
        promise.complete(value.mapError { $0 as any Error })
    }

    /// An ATT request got no answer in time: the read fails and the link drops.
    private func attTimeout(_ path: ObjectPath, promise: Promise<[UInt8]>, link: Int) async {
        guard clearPendingRead(path, promise) else { return }
        let device = model.withLock { model -> ObjectPath? in
            guard let characteristic = model.characteristics[path],
                model.devices[characteristic.devicePath]?.link == link
            else { return nil }
            return characteristic.devicePath
        }
        promise.complete(.failure(BlueZError.notConnected))
        if let device { await dropLink(device, onlyLink: link) }
    }

    func writeValue(_ call: DBusMethodCall) async throws -> [DBusValue] {
        count("WriteValue")
        let path = call.path
        let (bytes, options) = try call.arguments.decode([UInt8].self, [String: DBusValue].self)
        let type = try Self.option(options, "type", as: String.self)
        let offset = try Self.option(options, "offset", as: UInt16.self) ?? 0
        _ = try Self.option(options, "mtu", as: UInt16.self)
        _ = try Self.option(options, "device", as: ObjectPath.self)
        _ = try Self.option(options, "prepare-authorize", as: Bool.self)
        if let type, !["request", "command", "reliable"].contains(type) { throw BlueZError.invalidArguments }
        let link = try model.withLock { model -> Int in
            guard let characteristic = model.characteristics[path],
                let device = model.devices[characteristic.devicePath],
                device.gattExported
            else { throw BlueZError.unknownObject(path) }
            let flags = characteristic.configuration.flags
            let allowed: Bool
            switch type {
            case "command": allowed = flags.contains("write-without-response")
            case "request", "reliable": allowed = flags.contains("write") || flags.contains("reliable-write")
            default: allowed = flags.contains("write") || flags.contains("write-without-response")
            }
            guard allowed else { throw BlueZError.writeNotPermitted }
            guard device.connected else { throw BlueZError.notConnected }
            if device.faults.inProgress { throw BlueZError.inProgress }
            return device.link
        }
        if type != "command" { try await Task.sleep(for: scaled(configuration.latencies.write)) }
        try model.withLock { model in
            guard var characteristic = model.characteristics[path],
                model.devices[characteristic.devicePath]?.link == link
            else { throw BlueZError.notConnected }
            var stored =
                characteristic.written(onLink: link)
                ?? characteristic.configuration.value.value(characteristic.readSequence)
            guard Int(offset) <= stored.count else { throw BlueZError.attError(0x07) }
            if let role = characteristic.configuration.role {
                try model.written(bytes, offset: offset, role: role, device: characteristic.devicePath)
            }
            stored.replaceSubrange(Int(offset)..<min(stored.count, Int(offset) + bytes.count), with: bytes)
            characteristic.written = stored
            characteristic.writtenOnLink = link
            model.characteristics[path] = characteristic
        }
        return []
    }

    func startNotify(_ call: DBusMethodCall) async throws -> [DBusValue] {
        count("StartNotify")
        let path = call.path
        let client = call.sender ?? ""
        let first = try model.withLock { model -> Bool in
            guard var characteristic = model.characteristics[path],
                model.devices[characteristic.devicePath]?.gattExported == true
            else { throw BlueZError.unknownObject(path) }
            guard characteristic.configuration.canNotify else { throw BlueZError.notSupported }
            let first = characteristic.sessions.isEmpty
            characteristic.sessions.insert(client)
            model.characteristics[path] = characteristic
            return first
        }
        if first { await emitChanged(path, Self.characteristicInterface, ["Notifying": .boolean(true)]) }
        // bluetoothd answers once the CCCD write is acknowledged, and only then can the peripheral notify: the
        // notifier (whose first value is due within `latencies.firstNotification`) starts after the reply.
        let devicePath = model.withLock { $0.characteristics[path]?.devicePath } ?? path
        call.afterReply { [self] _ in reconcileNotifiers(of: devicePath) }
        return []
    }

    func stopNotify(_ call: DBusMethodCall) async throws -> [DBusValue] {
        count("StopNotify")
        let path = call.path
        let client = call.sender ?? ""
        let known = try model.withLock { model -> Bool in
            guard let characteristic = model.characteristics[path],
                model.devices[characteristic.devicePath]?.gattExported == true
            else { throw BlueZError.unknownObject(path) }
            return characteristic.sessions.contains(client)
        }
        guard known else { throw BlueZError.noNotifySession }
        await endNotifySession(path, client: client)
        return []
    }

    /// Ends `client`'s notify session; the last one stops notifications (Notifying=false).
    func endNotifySession(_ path: ObjectPath, client: String) async {
        let last = model.withLock { model -> Bool in
            guard var characteristic = model.characteristics[path], characteristic.sessions.remove(client) != nil
            else { return false }
            if characteristic.sessions.isEmpty {
                characteristic.notifier?.cancel()
                characteristic.notifier = nil
            }
            model.characteristics[path] = characteristic
            return characteristic.sessions.isEmpty
        }
        if last { await emitChanged(path, Self.characteristicInterface, ["Notifying": .boolean(false)]) }
    }

    /// Starts a notifier for each characteristic of the device that has sessions while the device is
    /// connected and its services are resolved.
    func reconcileNotifiers(of devicePath: ObjectPath) {
        model.withLock { model in
            guard let device = model.devices[devicePath] else { return }
            let generation = model.generation
            for service in device.services {
                for path in service.characteristics {
                    guard var characteristic = model.characteristics[path] else { continue }
                    let wanted = device.connected && device.gattExported && characteristic.notifying
                    if wanted, characteristic.notifier == nil {
                        characteristic.notifier = Task {
                            await self.notify(path, link: device.link, generation: generation)
                        }
                    } else if !wanted, let notifier = characteristic.notifier {
                        notifier.cancel()
                        characteristic.notifier = nil
                    }
                    model.characteristics[path] = characteristic
                }
            }
        }
    }

    /// Notifications as bluetoothd forwards them: PropertiesChanged(Value), consecutive sequence numbers. The
    /// first comes `latencies.firstNotification` after the subscription (a new session, or a new connection
    /// with a session), as a subscribed sensor sends its current value at once; then one per interval.
    private func notify(_ path: ObjectPath, link: Int, generation: Int) async {
        let interval = model.withLock { $0.characteristics[path]?.configuration.notifyInterval } ?? .seconds(1)
        var wait = min(scaled(configuration.latencies.firstNotification), interval)
        while !Task.isCancelled {
            try? await Task.sleep(for: wait)
            wait = interval
            let value = model.withLock { model -> [UInt8]? in
                guard !Task.isCancelled, model.generation == generation,
                    var characteristic = model.characteristics[path],
                    characteristic.notifying, let device = model.devices[characteristic.devicePath],
                    device.connected, device.link == link
                else { return nil }
                if device.faults.silentNotifications { return [] }  // a zombie link: connected, and silent
                let value = characteristic.configuration.value.value(characteristic.notifySequence)
                characteristic.notifySequence += 1
                characteristic.value = value
                model.characteristics[path] = characteristic
                return value
            }
            guard let value else { return }
            if value.isEmpty { continue }
            await emitChanged(path, Self.characteristicInterface, ["Value": .bytes(value)])
        }
    }

    func readDescriptor(_ call: DBusMethodCall, characteristic: ObjectPath) async throws -> [DBusValue] {
        count("ReadValue")
        _ = try call.arguments.decode([String: DBusValue].self)
        let connected = model.withLock { model in
            model.characteristics[characteristic].flatMap { model.devices[$0.devicePath]?.connected } ?? false
        }
        guard connected else { throw BlueZError.notConnected }
        try await Task.sleep(for: scaled(configuration.latencies.read))
        let value = cccdValue(characteristic)
        await emitChanged(call.path, Self.descriptorInterface, ["Value": .bytes(value)])
        return [.bytes(value)]
    }

    /// An option of `a{sv}` with the wanted type; a wrong type is `InvalidArguments`, as in bluetoothd.
    static func option<T: DBusDecodable>(_ options: [String: DBusValue], _ key: String, as type: T.Type) throws -> T? {
        guard let value = options[key] else { return nil }
        do {
            return try value.unwrappingVariants.decode(T.self)
        } catch {
            throw BlueZError.invalidArguments
        }
    }
}
