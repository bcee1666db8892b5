import DBus
import Basics

// Adapter behaviour: discovery sessions per client connection, filters, power and rfkill, RemoveDevice.

extension SimulatorEngine {
    func startDiscovery(adapter name: String, _ call: DBusMethodCall) async throws -> [DBusValue] {
        count("StartDiscovery")
        let client = call.sender ?? ""
        let first = try model.withLock { model -> Bool in
            guard var adapter = model.adapters[name] else { throw BlueZError.doesNotExist }
            guard adapter.powered else { throw BlueZError.notReady }
            guard !adapter.discoverySessions.contains(client) else { throw BlueZError.inProgress }
            adapter.discoverySessions.insert(client)
            model.adapters[name] = adapter
            return adapter.discoverySessions.count == 1
        }
        guard first else { return [] }
        let generation = model.withLock { $0.generation }
        // Discovering=true leaves before the reply, and before anything discovery finds, as bluetoothd's does (it
        // follows the kernel's discovery start). Started first, the discovery's first RSSI change could pass it on a
        // loaded machine.
        await emitChanged(call.path, Self.adapterInterface, ["Discovering": .boolean(true)])
        let task = Task {
            await withDiscardingTaskGroup { group in
                group.addTask { await self.discover(adapter: name, generation: generation) }
                group.addTask { await self.advertise(adapter: name, generation: generation) }
            }
        }
        // Unless the discovery ended meanwhile (the last session stopped: there is nothing to find for), or ended
        // and started again (that start has its own task).
        let kept = model.withLock { model -> Bool in
            guard model.generation == generation, let adapter = model.adapters[name], adapter.discovering,
                adapter.discoveryTask == nil
            else { return false }
            model.adapters[name]?.discoveryTask = task
            return true
        }
        if !kept { task.cancel() }
        return []
    }

    func stopDiscovery(adapter name: String, _ call: DBusMethodCall) async throws -> [DBusValue] {
        count("StopDiscovery")
        let client = call.sender ?? ""
        let hasSession = model.withLock { $0.adapters[name]?.discoverySessions.contains(client) ?? false }
        guard hasSession else { throw BlueZError.noDiscoveryStarted }
        await endDiscoverySession(adapter: name, client: client)
        return []
    }

    /// Ends `client`'s session; the last one stops discovery (Discovering=false, RSSI invalidated).
    func endDiscoverySession(adapter name: String, client: String) async {
        let stopped = model.withLock { model -> (ObjectPath, [ObjectPath])? in
            guard var adapter = model.adapters[name], adapter.discoverySessions.remove(client) != nil else {
                return nil
            }
            model.adapters[name] = adapter
            return adapter.discoverySessions.isEmpty ? model.stopDiscovering(name) : nil
        }
        guard let (adapterPath, devices) = stopped else { return }
        await announceDiscoveryStopped(adapterPath, devices)
    }

    func announceDiscoveryStopped(_ adapterPath: ObjectPath, _ devices: [ObjectPath]) async {
        await emitChanged(adapterPath, Self.adapterInterface, ["Discovering": .boolean(false)])
        for path in devices { await emitChanged(path, Self.deviceInterface, [:], invalidated: ["RSSI", "TxPower"]) }
    }

    /// While discovering: advertising devices appear (InterfacesAdded when new, else an RSSI change), then
    /// their RSSI changes every `rssiInterval`.
    private func discover(adapter name: String, generation: Int) async {
        try? await Task.sleep(for: scaled(configuration.latencies.discovery))
        var round: Int16 = 0
        while !Task.isCancelled {
            let found = model.withLock { model -> [(ObjectPath, Bool, Int16)] in
                guard model.generation == generation, model.adapters[name]?.discovering == true else { return [] }
                // A stuck scan: Discovering=true, and nothing found until the controller is reset.
                if model.adapters[name]?.discoveryStuck == true { return [] }
                var found: [(ObjectPath, Bool, Int16)] = []
                // Passive sensors appear and change through their own advertisements (`advertise`).
                for (path, device) in model.devices
                where device.configuration.adapter == name && device.advertising && !device.blocked
                    && device.configuration.advertisement == nil
                {
                    let rssi = device.configuration.rssi + (round % 7) - 3
                    let isNew = !device.exported
                    model.devices[path]?.exported = true
                    model.devices[path]?.rssi = rssi
                    found.append((path, isNew, rssi))
                }
                return found
            }
            for (path, isNew, rssi) in found.sorted(by: { $0.0 < $1.0 }) {
                if Task.isCancelled { return }
                let object = isNew ? deviceObject(path, battery: false) : nil
                await emit { connection in
                    // Checked again on the connection, where signals are sent in order: a stop cancels this task
                    // as it ends the session, before its Discovering=false is sent, so nothing found is signalled
                    // after that (a finding checked before the stop and sent after it reached the next
                    // discovery's client ahead of its Discovering=true, under ThreadSanitizer).
                    guard !Task.isCancelled else { return }
                    if let object {
                        try await connection.export(object, at: path)
                    } else {
                        try connection.propertiesChanged(
                            path: path, interface: Self.deviceInterface, changed: ["RSSI": .int16(rssi)])
                    }
                }
            }
            round &+= 1
            try? await Task.sleep(for: configuration.latencies.rssiInterval)
        }
    }

    /// Validates the filter as bluetoothd does and keeps what the simulator acts on for the calling client: an
    /// empty one removes its filter.
    func setDiscoveryFilter(adapter name: String, _ call: DBusMethodCall) throws -> [DBusValue] {
        count("SetDiscoveryFilter")
        let filter = try call.arguments.decode([String: DBusValue].self)
        let expected: [String: DBusSignature] = [
            "UUIDs": "as", "RSSI": "n", "Pathloss": "q", "Transport": "s", "DuplicateData": "b",
            "Discoverable": "b", "Pattern": "s",
        ]
        for (key, value) in filter {
            guard let signature = expected[key], [value.unwrappingVariants].signature == signature else {
                throw BlueZError.invalidArguments
            }
        }
        if let transport = filter["Transport"]?.unwrappingVariants.string, !["auto", "bredr", "le"].contains(transport)
        {
            throw BlueZError.invalidArguments
        }
        if filter["RSSI"] != nil, filter["Pathloss"] != nil { throw BlueZError.invalidArguments }
        let client = call.sender ?? ""
        let kept =
            filter.isEmpty
            ? nil : ClientDiscoveryFilter(duplicateData: filter["DuplicateData"]?.unwrappingVariants.boolean ?? false)
        try model.withLock { model in
            guard model.adapters[name] != nil else { throw BlueZError.doesNotExist }
            model.adapters[name]?.discoveryFilters[client] = kept
        }
        return []
    }

    func removeDevice(adapter name: String, _ call: DBusMethodCall) async throws -> [DBusValue] {
        count("RemoveDevice")
        let path = try call.arguments.decode(ObjectPath.self)
        let known = model.withLock { model in
            model.devices[path].map { $0.exported && $0.configuration.adapter == name } ?? false
        }
        guard known else { throw BlueZError.doesNotExist }
        await removeFromBus(path, error: BlueZError.doesNotExist, announceLinkDown: true)
        return []
    }

    /// Takes a device and its GATT objects off the bus (InterfacesRemoved, children first) and fails what
    /// is pending on it. It comes back when discovered again.
    func removeFromBus(_ path: ObjectPath, error: DBusError, announceLinkDown: Bool) async {
        if announceLinkDown { await dropLink(path) }
        let (pending, reads, objects) = model.withLock { model -> (Promise<Void>?, [Promise<[UInt8]>], [ObjectPath]) in
            guard var device = model.devices[path] else { return (nil, [], []) }
            let pending = device.pendingConnect
            var objects: [ObjectPath] = []
            var reads: [Promise<[UInt8]>] = []
            if device.gattExported {
                for service in device.services where !service.claimed {
                    for characteristicPath in service.characteristics.reversed() {
                        guard var characteristic = model.characteristics[characteristicPath] else { continue }
                        objects.append(contentsOf: characteristic.descriptorPaths.reversed())
                        objects.append(characteristicPath)
                        if let read = characteristic.pendingRead { reads.append(read.promise) }
                        characteristic.pendingRead = nil
                        characteristic.notifier?.cancel()
                        characteristic.notifier = nil
                        characteristic.sessions.removeAll()
                        model.characteristics[characteristicPath] = characteristic
                    }
                    objects.append(service.path)
                }
            }
            objects.append(path)
            _ = device.unexport()  // its pending Connect was taken above
            model.devices[path] = device
            return (pending, reads, objects)
        }
        let gone = BlueZError.unknownObject(path)
        pending?.complete(.failure(error.name == gone.name ? gone : error))
        for read in reads { read.complete(.failure(gone)) }
        await emit { connection in
            for object in objects { try connection.unexport(at: object) }
        }
    }

    // MARK: Power

    /// Powers an adapter on or off. Off: discovery stops, every link drops, pending connects fail.
    func setPowered(_ on: Bool, adapter name: String, announcePowered: Bool) async throws {
        let change = try model.withLock { model -> (ObjectPath, Bool, [ObjectPath], (ObjectPath, [ObjectPath])?)? in
            guard var adapter = model.adapters[name] else { throw BlueZSimulatorError.unknownAdapter(name) }
            if on, adapter.blocked { throw BlueZError.blocked }
            guard adapter.powered != on else { return nil }
            adapter.powered = on
            // Powering off resets the controller: a wedge clears; off and on again counts as one power-cycle.
            if !on {
                adapter.wedged = false
                adapter.discoveryStuck = false
            } else {
                adapter.powerCycles += 1
            }
            model.adapters[name] = adapter
            let stopped = !on && adapter.discovering ? model.stopDiscovering(name) : nil
            if !on { model.adapters[name]?.discoverySessions.removeAll() }
            let links =
                on
                ? []
                : model.devices.values.filter {
                    $0.configuration.adapter == name && ($0.connected || $0.pendingConnect != nil)
                }.map(\.path)
            return (adapter.path, on, links, stopped)
        }
        guard let (path, powered, links, stopped) = change else { return }
        for device in links {
            let pending = model.withLock { model in
                defer { model.devices[device]?.pendingConnect = nil }
                return model.devices[device]?.pendingConnect
            }
            pending?.complete(.failure(BlueZError.inputOutput))
            await dropLink(device)
        }
        if let (adapterPath, devices) = stopped { await announceDiscoveryStopped(adapterPath, devices) }
        let powerState = model.withLock { $0.adapters[name]?.powerState ?? "off" }
        var changed: [String: DBusValue] = ["PowerState": .string(powerState)]
        if announcePowered { changed["Powered"] = .boolean(powered) }
        await emitChanged(path, Self.adapterInterface, changed)
    }

    /// rfkill: blocked powers the adapter off and shows PowerState "off-blocked"; unblocked leaves it off.
    func setBlocked(_ blocked: Bool, adapter name: String) async throws {
        if blocked { try await setPowered(false, adapter: name, announcePowered: true) }
        let path = try model.withLock { model -> ObjectPath in
            guard let adapter = model.adapters[name] else { throw BlueZSimulatorError.unknownAdapter(name) }
            model.adapters[name]?.blocked = blocked
            return adapter.path
        }
        await emitChanged(path, Self.adapterInterface, ["PowerState": .string(blocked ? "off-blocked" : "off")])
    }
}

extension Model {
    /// Marks discovery stopped on `name`; returns the adapter path and the devices whose RSSI goes away.
    mutating func stopDiscovering(_ name: String) -> (ObjectPath, [ObjectPath])? {
        guard let adapter = adapters[name] else { return nil }
        adapter.discoveryTask?.cancel()
        adapters[name]?.discoveryTask = nil
        resetAdvertising(adapter: name)
        var devicesWithRSSI: [ObjectPath] = []
        for (path, device) in devices where device.configuration.adapter == name && device.rssi != nil {
            devices[path]?.rssi = nil
            if device.exported { devicesWithRSSI.append(path) }
        }
        return (adapter.path, devicesWithRSSI.sorted())
    }
}
