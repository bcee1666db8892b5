import DBus
import Basics

// Device1.Connect / Disconnect and the link's life: GATT objects on the first connection, ServicesResolved,
// the battery plugin, link loss.

extension SimulatorEngine {
    private enum ConnectPlan {
        case alreadyConnected
        case abort(Promise<Void>)
        case connect(Promise<Void>)
    }

    func connect(_ call: DBusMethodCall) async throws -> [DBusValue] {
        count("Connect")
        let path = call.path
        let plan = try model.withLock { model -> ConnectPlan in
            guard var device = model.devices[path], device.exported else { throw BlueZError.unknownObject(path) }
            guard model.adapters[device.configuration.adapter]?.powered == true else { throw BlueZError.notReady }
            if device.faults.inProgress { throw BlueZError.inProgress }
            if device.connected { return .alreadyConnected }
            if device.pendingConnect != nil { throw BlueZError.connectAlreadyInProgress }
            let promise = Promise<Void>()
            device.pendingConnect = promise
            let wedged = model.adapters[device.configuration.adapter]?.wedged == true
            let aborting = !device.advertising || device.faults.connectAborts > 0 || wedged
            if device.faults.connectAborts > 0 { device.faults.connectAborts -= 1 }
            model.devices[path] = device
            return aborting ? .abort(promise) : .connect(promise)
        }
        switch plan {
        case .alreadyConnected:
            return []
        case .abort(let promise):
            schedule(after: configuration.latencies.connectAbort) { [self] in
                let mine = model.withLock { model in
                    guard model.devices[path]?.pendingConnect === promise else { return false }
                    model.devices[path]?.pendingConnect = nil
                    return true
                }
                if mine { promise.complete(.failure(BlueZError.connectionAbortByLocal)) }
            }
            try await promise.value()
            return []
        case .connect(let promise):
            schedule(after: configuration.latencies.connect) { [self] in
                // Link up and the pending connect cleared in one step, so a Disconnect sees one or the other.
                let mine = model.withLock { model in
                    guard model.devices[path]?.pendingConnect === promise else { return false }
                    model.devices[path]?.pendingConnect = nil
                    model.devices[path]?.connected = true
                    model.devices[path]?.link += 1
                    return true
                }
                if mine { promise.succeed() }
            }
            try await promise.value()
            let link = model.withLock { $0.devices[path]?.link ?? -1 }
            if !configuration.quirks.contains(.noConnectedSignal) {
                // Connected=true leaves before the method reply.
                await emitChanged(path, Self.deviceInterface, ["Connected": .boolean(true)])
            }
            call.afterReply { [self] connection in await resolveServices(path, link: link, on: connection) }
            return []
        }
    }

    /// After the Connect reply: GATT objects (first connection only), the battery plugin, ServicesResolved=true,
    /// and notifications for existing notify sessions.
    func resolveServices(_ path: ObjectPath, link: Int, on connection: isolated DBusConnection) async {
        let firstConnection = model.withLock { model -> Bool? in
            guard let device = model.devices[path], device.link == link, device.connected else { return nil }
            model.devices[path]?.gattExported = true
            return !device.gattExported
        }
        guard let firstConnection else { return }
        let gatt = firstConnection ? gattObjects(path) : []
        if configuration.quirks.contains(.servicesResolvedBeforeGATT), firstConnection {
            await markServicesResolved(path, link: link, on: connection)
            // bluez#1489: the GATT objects follow 5–40 ms later.
            try? await Task.sleep(for: .milliseconds(Int.random(in: 5...40)))
            guard model.withLock({ $0.devices[path]?.link == link }) else { return }
            for (objectPath, object) in gatt { try? await connection.export(object, at: objectPath) }
            await addBattery(path, link: link, on: connection)
        } else {
            for (objectPath, object) in gatt { try? await connection.export(object, at: objectPath) }
            await addBattery(path, link: link, on: connection)
            await markServicesResolved(path, link: link, on: connection)
        }
        reconcileNotifiers(of: path)
    }

    private func markServicesResolved(_ path: ObjectPath, link: Int, on connection: isolated DBusConnection) async {
        let resolved = model.withLock { model in
            guard model.devices[path]?.link == link, model.devices[path]?.connected == true else { return false }
            model.devices[path]?.servicesResolved = true
            return true
        }
        guard resolved else { return }
        try? connection.propertiesChanged(
            path: path, interface: Self.deviceInterface, changed: ["ServicesResolved": .boolean(true)])
    }

    private func addBattery(_ path: ObjectPath, link: Int, on connection: isolated DBusConnection) async {
        guard configuration.batteryPlugin else { return }
        let add = model.withLock { model in
            guard let device = model.devices[path], device.link == link, device.batteryService != nil,
                !device.batteryExported
            else { return false }
            model.devices[path]?.batteryExported = true
            return true
        }
        if add { try? await connection.export(deviceObject(path, battery: true), at: path) }
    }

    private enum DisconnectPlan {
        case cancel(Promise<Void>)
        case nothing
        case disconnect(link: Int)
    }

    func disconnect(_ call: DBusMethodCall) async throws -> [DBusValue] {
        count("Disconnect")
        let path = call.path
        let plan = try model.withLock { model -> DisconnectPlan in
            guard let device = model.devices[path], device.exported else { throw BlueZError.unknownObject(path) }
            if let pending = device.pendingConnect {
                model.devices[path]?.pendingConnect = nil
                return .cancel(pending)
            }
            return device.connected ? .disconnect(link: device.link) : .nothing
        }
        switch plan {
        case .cancel(let pending):
            pending.complete(.failure(BlueZError.connectionCanceled))
        case .nothing:
            break
        case .disconnect(let link):
            // As bluetoothd 5.66 (seen in the qemu lab): Battery1 goes at once; ~2 s later the reply, with
            // ServicesResolved=false, then Connected=false ~6 ms after it, each in a PropertiesChanged of its own.
            await removeBattery(path)
            try await Task.sleep(for: scaled(configuration.latencies.disconnect))
            call.afterReply { [self] _ in
                await unresolveServices(path, link: link)
                try? await Task.sleep(for: scaled(.milliseconds(6)))
                await dropLink(path, onlyLink: link)
            }
        }
        return []
    }

    /// Disconnect's first step: ServicesResolved=false while the link is still up.
    private func unresolveServices(_ path: ObjectPath, link: Int) async {
        let changed = model.withLock { model in
            guard let device = model.devices[path], device.link == link, device.servicesResolved else { return false }
            model.devices[path]?.servicesResolved = false
            return true
        }
        guard changed else { return }
        await emitChanged(path, Self.deviceInterface, ["ServicesResolved": .boolean(false)])
    }

    /// Battery1 leaves the device (the plugin lets go as soon as Disconnect is called).
    private func removeBattery(_ path: ObjectPath) async {
        let removed = model.withLock { model in
            guard model.devices[path]?.batteryExported == true else { return false }
            model.devices[path]?.batteryExported = false
            return true
        }
        guard removed, model.withLock({ $0.devices[path]?.exported ?? false }) else { return }
        let object = deviceObject(path, battery: false)
        await emit { try await $0.export(object, at: path) }
    }

    /// The link went down: Connected=false and ServicesResolved=false in one PropertiesChanged (after a
    /// Disconnect, ServicesResolved is false already and only Connected changes), reads in flight fail with
    /// "Not connected", notifications stop (sessions stay), Battery1 goes.
    func dropLink(_ path: ObjectPath, onlyLink: Int? = nil) async {
        let dropped = model.withLock { model -> (reads: [Promise<[UInt8]>], battery: Bool, wasResolved: Bool)? in
            guard var device = model.devices[path], device.connected else { return nil }
            if let onlyLink, device.link != onlyLink { return nil }
            let wasResolved = device.servicesResolved
            device.connected = false
            device.servicesResolved = false
            device.link += 1
            device.faults.silentNotifications = false  // a zombie link heals when it is dropped and made again
            let battery = device.batteryExported
            device.batteryExported = false
            model.devices[path] = device
            var reads: [Promise<[UInt8]>] = []
            for service in device.services {
                for characteristicPath in service.characteristics {
                    guard var characteristic = model.characteristics[characteristicPath] else { continue }
                    if let read = characteristic.pendingRead { reads.append(read.promise) }
                    characteristic.pendingRead = nil
                    characteristic.notifier?.cancel()
                    characteristic.notifier = nil
                    model.characteristics[characteristicPath] = characteristic
                }
            }
            return (reads, battery, wasResolved)
        }
        guard let dropped else { return }
        for read in dropped.reads { read.complete(.failure(BlueZError.notConnected)) }
        let exported = model.withLock { $0.devices[path]?.exported ?? false }
        guard exported else { return }
        if dropped.battery {
            let object = deviceObject(path, battery: false)
            await emit { try await $0.export(object, at: path) }
        }
        await emitChanged(
            path, Self.deviceInterface,
            dropped.wasResolved
                ? ["Connected": .boolean(false), "ServicesResolved": .boolean(false)] : ["Connected": .boolean(false)])
    }
}
