import DBus
import KeepAlive
public import Polling

extension BlueZTransport {
    // MARK: Connect

    public func connect(_ peripheral: Peripheral, options: ConnectOptions) async throws {
        try await withTaskExecutorPreference(connection.taskExecutor) {
            try await connectOnThread(peripheral, options: options)
        }
    }

    private func connectOnThread(_ peripheral: Peripheral, options: ConnectOptions) async throws {
        let deadline = time.now + options.timeout
        let path: ObjectPath
        do {
            path = try BlueZ.devicePath(peripheral)
        } catch {
            _ = try checkAdapter(peripheral.adapter)  // an adapter that is wrong too is said first, as always
            throw error
        }
        // Before anything can fail: a connect that brings no link up reads `.zero`, never the last poll's time.
        cache.startLinkClock(path)
        _ = try checkAdapter(peripheral.adapter)
        if cache.deviceObject(path) == nil {
            try await discover(path, of: peripheral, before: deadline)
        }
        do {
            let resolution = try await connectFound(path, peripheral: peripheral, options: options, deadline: deadline)
            health.withLock { health in
                health[peripheral, default: DeviceHealth()].consecutiveFailures = 0
                health[peripheral, default: DeviceHealth()].lastResolution = resolution
            }
        } catch {
            // Never leave a half-open link: Disconnect also cancels a Connect still pending in BlueZ. A
            // cancelled caller does not wait for it (BlueZ takes ~2 s): the Disconnect goes on, and the caller's
            // own `disconnect` joins it.
            let teardown = disconnectTask(peripheral, timeout: .seconds(3))
            if !Task.isCancelled { await teardown.value }
            await noteFailure(of: peripheral, path: path, error: error)
            throw error
        }
    }

    /// Returns how long the services and the wanted characteristics took once the link was up.
    private func connectFound(
        _ path: ObjectPath, peripheral: Peripheral, options: ConnectOptions, deadline: KeepAliveInstant
    ) async throws -> Duration {
        let address = peripheral.address
        let remaining: @Sendable () -> Duration = { self.time.now.duration(to: deadline) }
        do {
            _ = try await cache.guarded(device: path, requireConnected: false) { cancellation in
                try await self.call(
                    path, BlueZ.deviceInterface, "Connect", timeout: remaining(), cancellation: cancellation,
                    context: "Connect \(address)")
            }
        } catch let error as TransportError where error.code == .timeout && error.dbusName == BlueZErrors.Name.noReply {
            throw TransportError(
                .timeout, "Connect \(address) did not complete within \(options.timeout.compact)",
                dbusName: error.dbusName)
        }
        // bluetoothd sends Connected=true before the Connect reply, and signals are applied on the connection's
        // queue before the reply is handed over: if the signal came, the cache has it now. Quirk 2: sometimes
        // it never comes — then ask.
        if cache.deviceObject(path)?.flag(.connected) != true {
            connectedQueries.withLock { $0 += 1 }
            let connected = try await call(
                path, BlueZ.propertiesInterface, "Get", [.string(BlueZ.deviceInterface), .string("Connected")],
                expecting: "v",
                timeout: max(remaining(), .seconds(1)), context: "Get Connected of \(address)"
            )
            guard connected.first?.unwrappingVariants.boolean == true else {
                throw TransportError(.notConnected, "Connect \(address) returned but the device is not connected")
            }
            // The link is timed from here: later than bluetoothd's Connected=true (which was not signalled), by
            // one Get.
            cache.update(path, BlueZ.deviceInterface, ["Connected": .boolean(true)])
        }
        let linkUp = time.now
        try await cache.wait(until: deadline, for: "ServicesResolved on \(address)") { tree in
            guard let device = tree.device(path) else {
                return .failed(
                    TransportError(.deviceVanished, "device \(address) disappeared while resolving services"))
            }
            if device.flag(.connected) == false {
                return .failed(TransportError(.notConnected, "\(address) disconnected while resolving services"))
            }
            return device.flag(.servicesResolved) == true ? .satisfied : .waiting
        }
        try await waitForCharacteristics(options.characteristics, path: path, address: address, deadline: deadline)
        return linkUp.duration(to: time.now)
    }

    /// Quirk 1: ServicesResolved can come before the GATT objects. Wait a little for the wanted
    /// characteristics, then fetch the tree again, then give up with a permanent error naming what is missing.
    private func waitForCharacteristics(
        _ wanted: [BluetoothUUID], path: ObjectPath, address: String, deadline: KeepAliveInstant
    ) async throws {
        guard !wanted.isEmpty else { return }
        let missing: @Sendable (BlueZObjectCache.TreeView) -> [BluetoothUUID] = { tree in
            wanted.filter { uuid in
                tree.characteristicPath(uuid, of: path) == nil
                    && !(uuid == Self.batteryLevel && tree.properties(path, BlueZ.batteryInterface) != nil)
            }
        }
        let graceEnd = min(deadline, time.now + configuration.characteristicGrace)
        do {
            try await cache.wait(until: graceEnd, for: "characteristics on \(address)") { tree in
                !tree.hasObject(path)
                    ? .failed(TransportError(.deviceVanished, "device \(address) disappeared"))
                    : (missing(tree).isEmpty ? .satisfied : .waiting)
            }
            return
        } catch let error as TransportError where error.code == .timeout {
            logger.notice(
                "wanted characteristics not there after ServicesResolved; fetching BlueZ's tree again",
                metadata: ["address": "\(address)"])
        }
        await cache.resync()
        let stillMissing = cache.state.withLock { missing(BlueZObjectCache.TreeView(state: $0)) }
        guard stillMissing.isEmpty else {
            let found = cache.characteristics(of: path).compactMap(\.uuid?.shortDescription).joined(separator: ", ")
            throw TransportError(
                .characteristicNotFound,
                """
                \(address) has no characteristic \(stillMissing.map(\.shortDescription).joined(separator: ", ")) \
                (found: \(found.isEmpty ? "none" : found))
                """
            )
        }
    }

    /// Runs discovery on the adapter until the device object appears.
    private func discover(_ path: ObjectPath, of peripheral: Peripheral, before deadline: KeepAliveInstant) async throws
    {
        try await discovery.acquire(adapter: peripheral.adapter, filter: DiscoveryFilter())
        do {
            try await cache.wait(until: deadline, for: "\(peripheral.address) to be discovered") { tree in
                tree.device(path) != nil ? .satisfied : .waiting
            }
        } catch let error as TransportError where error.code == .timeout {
            await discovery.release(adapter: peripheral.adapter, filter: DiscoveryFilter())
            throw TransportError(
                .deviceNotFound,
                "\(peripheral.address) not found on \(peripheral.adapter): not advertising, or out of range")
        } catch {
            await discovery.release(adapter: peripheral.adapter, filter: DiscoveryFilter())
            throw error
        }
        await discovery.release(adapter: peripheral.adapter, filter: DiscoveryFilter())
    }

    /// Stale-cache escalation: a device that keeps failing to connect gets its BlueZ object removed, so the next
    /// attempt rediscovers it from a fresh advertisement. At most once per cooldown per device.
    private func noteFailure(of peripheral: Peripheral, path: ObjectPath, error: any Error) async {
        guard let error = error as? TransportError, error.isTransient, error.code != .serviceRestarted,
            error.code != .serviceUnavailable, error.code != .adapterUnavailable
        else { return }
        let now = time.now
        let threshold = configuration.staleDeviceThreshold
        let cooldown = configuration.staleDeviceCooldown
        let remove: Bool = health.withLock { health in
            var entry = health[peripheral, default: DeviceHealth()]
            entry.consecutiveFailures += 1
            defer { health[peripheral] = entry }
            guard entry.consecutiveFailures >= threshold else { return false }
            if let last = entry.lastRemoval, last.duration(to: now) < cooldown { return false }
            entry.lastRemoval = now
            entry.consecutiveFailures = 0
            return true
        }
        guard remove, let adapterPath = try? BlueZ.adapterPath(peripheral.adapter) else { return }
        logger.warning(
            "device keeps failing to connect: removing its BlueZ object so it is rediscovered",
            metadata: [
                "address": "\(peripheral.address)", "adapter": "\(peripheral.adapter)", "last_error": "\(error)",
            ]
        )
        await detached {
            _ = try? await self.call(
                adapterPath, BlueZ.adapterInterface, "RemoveDevice", [.objectPath(path)], timeout: .seconds(5),
                context: "RemoveDevice")
        }
    }

    // MARK: GATT

    /// The resolved characteristic with `uuid` on a connected device.
    func characteristicPath(_ uuid: BluetoothUUID, of peripheral: Peripheral) throws -> (
        device: ObjectPath, characteristic: ObjectPath
    ) {
        let path = try BlueZ.devicePath(peripheral)
        guard let device = cache.deviceObject(path) else {
            throw TransportError(
                .deviceVanished, "device \(peripheral.address) is not known to BlueZ on \(peripheral.adapter)")
        }
        guard let characteristic = cache.characteristicPath(uuid, of: path) else {
            if device.flag(.connected) != true {
                throw TransportError(.notConnected, "Not connected: \(peripheral.address)")
            }
            throw TransportError(
                .characteristicNotFound, "\(peripheral.address) has no characteristic \(uuid.shortDescription)")
        }
        return (path, characteristic)
    }

    /// Characteristic Presentation Format (0x2904).
    static let presentationFormatDescriptor = BluetoothUUID(assigned: 0x2904)

    /// Reads `characteristic`'s 0x2904 descriptor (GattDescriptor1.ReadValue) while connected; nil when BlueZ
    /// shows it none. The poll engine keeps the answer per device.
    public func presentationFormat(of characteristic: BluetoothUUID, from peripheral: Peripheral) async throws
        -> [UInt8]?
    {
        try await withTaskExecutorPreference(connection.taskExecutor) {
            let (device, target) = try characteristicPath(characteristic, of: peripheral)
            guard
                let descriptor = cache.descriptors(of: target).first(where: {
                    $0.uuid == Self.presentationFormatDescriptor
                })
            else {
                return nil
            }
            let context: @Sendable () -> String = {
                "ReadValue of the 0x2904 descriptor of \(characteristic.shortDescription) on \(peripheral.address)"
            }
            let reply = try await cache.guarded(device: device, requireConnected: true) { cancellation in
                try await self.call(
                    descriptor.path, BlueZ.gattDescriptorInterface, "ReadValue", [Self.emptyOptions()], expecting: "ay",
                    timeout: self.configuration.gattTimeout, cancellation: cancellation, context: context())
            }
            guard reply.count == 1, let bytes = reply[0].bytes else {
                throw TransportError(
                    .protocolError, "\(context()): expected a reply of type 'ay', got '\(reply.signature)'")
            }
            return bytes
        }
    }

    /// Battery Level (0x2A19). bluetoothd's battery plugin adds `org.bluez.Battery1.Percentage`; 5.66 keeps the
    /// characteristic exported too (the qemu lab), other versions have hidden it. A read of 0x2A19 uses the
    /// characteristic when it is there and falls back to Battery1 when it is not.
    static let batteryLevel = BluetoothUUID(assigned: 0x2A19)

    public func read(_ characteristic: BluetoothUUID, from peripheral: Peripheral) async throws -> [UInt8] {
        try await withTaskExecutorPreference(connection.taskExecutor) {
            try await readOnThread(characteristic, from: peripheral)
        }
    }

    private func readOnThread(_ characteristic: BluetoothUUID, from peripheral: Peripheral) async throws -> [UInt8] {
        if characteristic == Self.batteryLevel, let path = try? BlueZ.devicePath(peripheral),
            cache.characteristicPath(characteristic, of: path) == nil, let battery = cache.battery(path)
        {
            guard cache.deviceObject(path)?.flag(.connected) == true else {
                throw TransportError(.notConnected, "Not connected: \(peripheral.address)")
            }
            guard let percentage = battery.percentage else {
                throw TransportError(
                    .protocolError, "Battery1.Percentage of \(peripheral.address) is missing or not a byte")
            }
            return [percentage]
        }
        let (device, target) = try characteristicPath(characteristic, of: peripheral)
        // Only formatted when something fails: a read's hot path builds no strings.
        let context: @Sendable () -> String = {
            "ReadValue \(characteristic.shortDescription) on \(peripheral.address)"
        }
        let reply = try await cache.guarded(device: device, requireConnected: true) { cancellation in
            try await self.call(
                target, BlueZ.gattCharacteristicInterface, "ReadValue", [Self.emptyOptions()], expecting: "ay",
                timeout: self.configuration.gattTimeout, cancellation: cancellation, context: context())
        }
        guard reply.count == 1, let bytes = reply[0].bytes else {
            throw TransportError(
                .protocolError, "\(context()): expected a reply of type 'ay', got '\(reply.signature)'")
        }
        return bytes
    }

    public func write(_ value: [UInt8], to characteristic: BluetoothUUID, of peripheral: Peripheral, type: WriteType)
        async throws
    {
        try await withTaskExecutorPreference(connection.taskExecutor) {
            try await writeOnThread(value, to: characteristic, of: peripheral, type: type)
        }
    }

    private func writeOnThread(
        _ value: [UInt8], to characteristic: BluetoothUUID, of peripheral: Peripheral, type: WriteType
    ) async throws {
        let (device, target) = try characteristicPath(characteristic, of: peripheral)
        let options: DBusValue = .dictionary(
            key: "s", value: "v", [.init(key: .string("type"), value: .variant(.string(type.rawValue)))])
        _ = try await cache.guarded(device: device, requireConnected: true) { cancellation in
            try await self.call(
                target, BlueZ.gattCharacteristicInterface, "WriteValue", [.bytes(value), options],
                timeout: self.configuration.gattTimeout, cancellation: cancellation,
                context: "WriteValue \(characteristic.shortDescription) on \(peripheral.address)")
        }
    }

    public func notifications(from characteristic: BluetoothUUID, of peripheral: Peripheral) async throws
        -> AsyncThrowingStream<[UInt8], any Error>
    {
        try await withTaskExecutorPreference(connection.taskExecutor) {
            try await notificationsOnThread(from: characteristic, of: peripheral)
        }
    }

    private func notificationsOnThread(from characteristic: BluetoothUUID, of peripheral: Peripheral) async throws
        -> AsyncThrowingStream<[UInt8], any Error>
    {
        let (device, target) = try characteristicPath(characteristic, of: peripheral)
        // Listen before StartNotify, so the first notification cannot slip through.
        let (values, unsubscribe) = cache.notifications(of: target)
        let context = "StartNotify \(characteristic.shortDescription) on \(peripheral.address)"
        do {
            _ = try await cache.guarded(device: device, requireConnected: true) { cancellation in
                try await self.call(
                    target, BlueZ.gattCharacteristicInterface, "StartNotify", timeout: self.configuration.gattTimeout,
                    cancellation: cancellation, context: context)
            }
        } catch {
            unsubscribe()
            throw error
        }
        let (stream, continuation) = AsyncThrowingStream<[UInt8], any Error>.makeStream()
        let forward = Task(executorPreference: connection.taskExecutor) {
            do {
                for try await value in values { continuation.yield(value) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        let path = target
        continuation.onTermination = { _ in
            forward.cancel()
            unsubscribe()
            // Notify sessions outlive a disconnect in BlueZ: end ours explicitly, best effort.
            Task(executorPreference: self.connection.taskExecutor) {
                _ = try? await self.call(
                    path, BlueZ.gattCharacteristicInterface, "StopNotify", timeout: .seconds(5), context: "StopNotify")
            }
        }
        return stream
    }

    // MARK: Disconnect

    public func disconnect(_ peripheral: Peripheral, timeout: Duration) async {
        // Waited for even by a cancelled caller: the task itself is not cancelled, and the call is bounded.
        let task = disconnectTask(peripheral, timeout: timeout)
        await withTaskExecutorPreference(connection.taskExecutor) { await task.value }
    }

    /// The Disconnect in flight for `peripheral`, or a new one. It removes itself when done, under the same
    /// lock it was registered with, so a finished Disconnect is never joined by mistake.
    func disconnectTask(_ peripheral: Peripheral, timeout: Duration) -> Task<Void, Never> {
        disconnects.withLock { running in
            if let task = running[peripheral] { return task }
            let task = Task(executorPreference: connection.taskExecutor) {
                await self.sendDisconnect(peripheral, timeout: timeout)
                _ = self.disconnects.withLock { $0.removeValue(forKey: peripheral) }
            }
            running[peripheral] = task
            return task
        }
    }

    private func sendDisconnect(_ peripheral: Peripheral, timeout: Duration) async {
        guard let path = try? BlueZ.devicePath(peripheral) else { return }
        let started = time.now
        do {
            _ = try await call(
                path, BlueZ.deviceInterface, "Disconnect", timeout: timeout, context: "Disconnect \(peripheral.address)"
            )
        } catch let error as TransportError
            where [.notConnected, .deviceVanished, .serviceUnavailable, .serviceRestarted].contains(error.code)
        {
            return  // Nothing (left) to disconnect.
        } catch {
            logger.warning("Disconnect failed", metadata: ["address": "\(peripheral.address)", "error": "\(error)"])
            return
        }
        // bluetoothd 5.66 replies with ServicesResolved=false and drops Connected ~6 ms later (the qemu lab): its
        // device_remove_connection sends the Disconnect reply at once and Connected=false through GDBus's batched
        // PropertiesChanged, on a later turn of its main loop. A Connect sent in between finds the old link still
        // up and then loses it, and the link's time (`linkTime(of:)`) is not known yet. So the link is down, and
        // its Connected=false applied to the cache, when this returns (or the Disconnect's deadline has passed).
        let deadline = started + timeout
        do {
            try await cache.wait(until: deadline, for: "\(peripheral.address) to read Connected=false") { tree in
                tree.device(path)?.flag(.connected) == true ? .waiting : .satisfied
            }
        } catch let error as TransportError where [.serviceUnavailable, .serviceRestarted].contains(error.code) {
            // bluetoothd left meanwhile: there is no link to wait for.
        } catch {
            logger.warning(
                "Disconnect returned but the link stayed up",
                metadata: ["address": "\(peripheral.address)", "error": "\(error)"])
        }
    }

    // MARK: Link time

    /// How long the link of the last ``connect(_:options:)`` was up: bluetoothd's `Connected` true → false, as the
    /// object cache applied the two changes (instants on the transport's clock, read as each signal is applied;
    /// the `Get` that stands in for a Connected=true that never came is stamped when it is answered). `.zero` when
    /// that connect brought no link up; `nil` while the link is still up (a Disconnect past its deadline) or for a
    /// device never connected by this transport. A device that was already connected when the connect began
    /// counts from the connect.
    public func linkTime(of peripheral: Peripheral) -> Duration? {
        // Not an address: no connect could have made a link.
        guard let path = try? BlueZ.devicePath(peripheral) else { return .zero }
        return cache.linkTime(path)
    }

    /// From the `Connect` reply (or the `Get` that stood in for a missing `Connected` signal) to
    /// `ServicesResolved` and the wanted characteristics, for the last successful connect of `peripheral`.
    public func serviceResolutionTime(of peripheral: Peripheral) -> Duration? {
        health.withLock { $0[peripheral]?.lastResolution }
    }

    // MARK: Discovery

    public func discover(on adapter: String, filter: DiscoveryFilter) -> AsyncThrowingStream<Advertisement, any Error> {
        let (stream, continuation) = AsyncThrowingStream<Advertisement, any Error>.makeStream()
        let task = Task(executorPreference: connection.taskExecutor) {
            do {
                _ = try self.checkAdapter(adapter)
                // With addresses, a change is looked at only when its path is one of theirs: a lookup, nothing read.
                let paths = Set(
                    filter.addresses.compactMap { try? BlueZ.devicePath(Peripheral(address: $0, adapter: adapter)) })
                let prefix = "/org/bluez/\(adapter)/"
                let changes =
                    filter.heardOnly ? self.cache.heardDevices.subscribe() : self.cache.deviceChanges.subscribe()
                try await self.discovery.acquire(adapter: adapter, filter: filter)
                // Devices BlueZ already holds count as found.
                for device in filter.heardOnly ? [] : self.cache.devices(on: adapter)
                where paths.isEmpty || paths.contains(device.path) {
                    if let advertisement = self.advertisement(device, adapter: adapter, filter: filter) {
                        continuation.yield(advertisement)
                    }
                }
                for await path in changes {
                    if Task.isCancelled { break }
                    if paths.isEmpty {
                        guard path.rawValue.hasPrefix(prefix) else { continue }
                    } else {
                        guard paths.contains(path) else { continue }
                    }
                    guard let device = self.cache.device(path) else { continue }
                    if let advertisement = self.advertisement(device, adapter: adapter, filter: filter) {
                        continuation.yield(advertisement)
                    }
                }
                await self.discovery.release(adapter: adapter, filter: filter)
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    private func advertisement(_ device: Device1, adapter: String, filter: DiscoveryFilter) -> Advertisement? {
        guard let address = device.address else { return nil }
        if let minimum = filter.rssi, let rssi = device.rssi, rssi < minimum { return nil }
        if !filter.serviceUUIDs.isEmpty, Set(filter.serviceUUIDs).isDisjoint(with: device.uuids) { return nil }
        return Advertisement(
            peripheral: Peripheral(address: address, adapter: adapter),
            name: device.name ?? device.alias,
            rssi: device.rssi,
            serviceUUIDs: device.uuids,
            manufacturerData: device.manufacturerData,
            serviceData: device.serviceData
        )
    }
}
