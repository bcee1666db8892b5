import DBus

extension BlueZSimulator {
    /// Wedges `adapter`'s controller, as a real one sometimes does after weeks: every Connect through it aborts
    /// (`le-connection-abort-by-local`, after the abort delay) until the adapter is powered off, by anyone.
    /// Discovery and links already up are unaffected.
    public func wedge(adapter: String = "hci0") throws {
        try engine.model.withLock { model in
            guard model.adapters[adapter] != nil else { throw BlueZSimulatorError.unknownAdapter(adapter) }
            model.adapters[adapter]?.wedged = true
        }
    }

    /// Sticks `adapter`'s scanning: discovery starts and says Discovering=true, but finds nothing (no new device,
    /// no RSSI) until the adapter is powered off, by anyone. Devices already known stay known.
    public func stickDiscovery(adapter: String = "hci0") throws {
        try engine.model.withLock { model in
            guard model.adapters[adapter] != nil else { throw BlueZSimulatorError.unknownAdapter(adapter) }
            model.adapters[adapter]?.discoveryStuck = true
        }
    }

    /// Whether `adapter` is wedged (cleared by powering it off).
    public func isWedged(adapter: String = "hci0") -> Bool {
        engine.model.withLock { $0.adapters[adapter]?.wedged ?? false }
    }

    /// How often `adapter` was powered on again after being off (by a client's `Powered`, `setPowered`, or the
    /// control interface).
    public func powerOns(adapter: String = "hci0") -> Int {
        engine.model.withLock { $0.adapters[adapter]?.powerCycles ?? 0 }
    }

    /// Whether `adapter` is powered now.
    public func isPowered(adapter: String = "hci0") -> Bool {
        engine.model.withLock { $0.adapters[adapter]?.powered ?? false }
    }
}

extension BlueZSimulator {
    /// Unplugs `adapter` and plugs it back in under `newName` (a USB reset or hotplug that gets a new index):
    /// its links drop, its devices and it leave the bus (InterfacesRemoved), then it comes back with the same
    /// address under `/org/bluez/<newName>`, its cached devices beneath it (InterfacesAdded); org.bluez stays.
    public func replug(adapter: String = "hci0", as newName: String) async throws {
        try await engine.replug(adapter, as: newName)
    }

    /// The adapters on the bus now, in order.
    public var adapterNames: [String] {
        engine.model.withLock { $0.adapterOrder }
    }
}

extension SimulatorEngine {
    func replug(_ name: String, as newName: String) async throws {
        let (oldPath, devices) = try model.withLock { model -> (ObjectPath, [DeviceState]) in
            guard let adapter = model.adapters[name] else { throw BlueZSimulatorError.unknownAdapter(name) }
            guard model.adapters[newName] == nil else {
                throw BlueZSimulatorError.unknownAdapter("\(newName) (already present)")
            }
            return (
                adapter.path,
                model.devices.values.filter { $0.configuration.adapter == name }.sorted { $0.path < $1.path }
            )
        }
        // Unplugged: links down, devices and the adapter gone from the bus.
        for device in devices {
            await removeFromBus(device.path, error: BlueZError.unknownObject(device.path), announceLinkDown: true)
        }
        _ = model.withLock { $0.stopDiscovering(name) }
        await emit { connection in try connection.unexport(at: oldPath) }
        // Back under the new index, with the same address; its devices are the same peripherals.
        let newPath = try Self.rootPath.appending(newName)
        model.withLock { model in
            guard let old = model.adapters.removeValue(forKey: name) else { return }
            var configuration = old.configuration
            configuration.name = newName
            model.adapters[newName] = AdapterState(
                configuration: configuration, path: newPath, powered: old.powered, alias: old.alias)
            model.adapterOrder = model.adapterOrder.map { $0 == name ? newName : $0 }
            for device in devices {
                model.devices[device.path] = nil
                model.devicePathsByAddress[device.configuration.address] = nil
                for service in device.services {
                    for characteristic in service.characteristics { model.characteristics[characteristic] = nil }
                }
            }
        }
        var cached: [ObjectPath] = []
        for device in devices {
            var moved = device.configuration
            moved.adapter = newName
            let path = try add(moved)
            if moved.cached { cached.append(path) }
        }
        await emit { connection in try await connection.export(self.adapterObject(newPath), at: newPath) }
        for path in cached {
            model.withLock { $0.devices[path]?.exported = true }
            await emit { connection in try await connection.export(self.deviceObject(path, battery: false), at: path) }
        }
    }
}
