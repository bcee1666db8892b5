import KeepAlive
public import Polling
import Synchronization

extension MockTransport {
    public func discover(on adapter: String, filter: DiscoveryFilter) -> AsyncThrowingStream<Advertisement, any Error> {
        let found: [Advertisement] = state.withLock { state in
            state.devices.filter { $0.key.adapter == adapter && $0.value.present }
                .map { peripheral, device in
                    Advertisement(
                        peripheral: peripheral, name: device.name, rssi: device.rssi, serviceUUIDs: device.services)
                }
                .filter { filter.admits($0) }
                .sorted { $0.peripheral.address < $1.peripheral.address }
        }
        let (stream, continuation) = AsyncThrowingStream<Advertisement, any Error>.makeStream()
        for advertisement in found where !filter.heardOnly { continuation.yield(advertisement) }
        // Discovery runs until the consumer stops, like a real scan; ``advertise(_:)`` feeds it meanwhile.
        let id = state.withLock { state in
            let id = state.nextListenerID
            state.nextListenerID += 1
            state.listeners[id] = Listener(adapter: adapter, filter: filter, continuation: continuation)
            return id
        }
        let state = self.state
        continuation.onTermination = { _ in _ = state.withLock { $0.listeners.removeValue(forKey: id) } }
        return stream
    }

    public func connect(_ peripheral: Peripheral, options: ConnectOptions) async throws {
        let started = time.now
        state.withLock { state in
            // A new link time: a link still up (connected twice) counts from here.
            state.connects += 1
            var link = Link(connect: state.connects)
            if state.connected.contains(peripheral) { link.up(at: started) }
            state.links[peripheral] = link
        }
        try await perform(.connect, on: peripheral, latency: latency.connect, hangLimit: options.timeout) { state in
            guard let device = state.devices[peripheral], device.present else {
                throw TransportError(.deviceNotFound, "device \(peripheral.address) not found on \(peripheral.adapter)")
            }
            for uuid in options.characteristics where device.characteristics[uuid] == nil {
                throw TransportError(.characteristicNotFound, "\(peripheral.address) has no characteristic \(uuid)")
            }
            state.connected.insert(peripheral)
            state.maxSimultaneous = max(state.maxSimultaneous, state.connected.count)
            state.links[peripheral, default: Link()].up(at: time.now)
        }
    }

    public func read(_ characteristic: BluetoothUUID, from peripheral: Peripheral) async throws -> [UInt8] {
        var answer: (read: @Sendable (Int) -> [UInt8], count: Int)?
        try await perform(.read(characteristic), on: peripheral, latency: latency.read) { state in
            let read = try Self.characteristic(characteristic, of: peripheral, in: &state).read
            let count = state.devices[peripheral]!.reads[characteristic, default: 0]
            state.devices[peripheral]!.reads[characteristic] = count + 1
            answer = (read, count)
        }
        // Outside the transport's lock: a characteristic may ask the transport what was written to it.
        return answer.map { $0.read($0.count) } ?? []
    }

    /// The characteristic's 0x2904 descriptor, without latency or script (a descriptor read is not an operation
    /// the scripts fail); counted by ``presentationFormatReads(of:on:)``.
    public func presentationFormat(of characteristic: BluetoothUUID, from peripheral: Peripheral) async throws
        -> [UInt8]?
    {
        try state.withLock { state in
            let format = try Self.characteristic(characteristic, of: peripheral, in: &state).presentationFormat
            state.devices[peripheral]!.presentationReads[characteristic, default: 0] += 1
            return format
        }
    }

    /// How many times the 0x2904 descriptor of `characteristic` was read.
    public func presentationFormatReads(of characteristic: BluetoothUUID, on peripheral: Peripheral) -> Int {
        state.withLock { $0.devices[peripheral]?.presentationReads[characteristic] ?? 0 }
    }

    public func write(_ value: [UInt8], to characteristic: BluetoothUUID, of peripheral: Peripheral, type: WriteType)
        async throws
    {
        try await perform(.write(characteristic), on: peripheral, latency: latency.write) { state in
            _ = try Self.characteristic(characteristic, of: peripheral, in: &state)
            state.written[peripheral, default: [:]][characteristic, default: []].append(value)
        }
    }

    public func notifications(
        from characteristic: BluetoothUUID,
        of peripheral: Peripheral
    ) async throws -> AsyncThrowingStream<[UInt8], any Error> {
        var notify: (period: Duration, value: @Sendable (Int) -> [UInt8])?
        try await perform(.subscribe(characteristic), on: peripheral, latency: .zero) { state in
            notify = try Self.characteristic(characteristic, of: peripheral, in: &state).notify
            guard notify != nil else {
                throw TransportError(.notSupported, "characteristic \(characteristic) does not notify")
            }
        }
        guard let notify else {
            throw TransportError(.notSupported, "characteristic \(characteristic) does not notify")
        }
        let time = self.time
        return AsyncThrowingStream { continuation in
            let producer = Task {
                var index = 0
                while !Task.isCancelled {
                    do { try await time.sleep(for: notify.period) } catch { break }
                    guard self.connected.contains(peripheral) else {
                        continuation.finish(throwing: TransportError(.notConnected, "Not connected"))
                        return
                    }
                    continuation.yield(notify.value(index))
                    index += 1
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in producer.cancel() }
        }
    }

    public func disconnect(_ peripheral: Peripheral, timeout: Duration) async {
        let at = time.now
        let link: UInt64? = state.withLock { state in
            state.calls.append(Call(operation: .disconnect, peripheral: peripheral, at: at))
            state.connected.remove(peripheral)
            return state.links[peripheral]?.connect
        }
        // Disconnect's latency runs in a task that ignores the caller's cancellation (as the contract says:
        // disconnect works in a cancelled task), bounded by `timeout`.
        let delay = min(latency.disconnect, timeout)
        if delay > .zero {
            let time = self.time
            await Task { try? await time.sleep(for: delay) }.value
        }
        // The link was up until the stack's disconnect was done.
        let now = time.now
        state.withLock { state in
            if let link, state.links[peripheral]?.connect == link { state.links[peripheral]?.down(at: now) }
        }
    }

    // MARK: The common path: log, latency, script, cancellation, vanishing

    private static func characteristic(
        _ uuid: BluetoothUUID,
        of peripheral: Peripheral,
        in state: inout State
    ) throws -> Characteristic {
        guard state.connected.contains(peripheral) else {
            throw TransportError(.notConnected, "Not connected", dbusName: "org.bluez.Error.Failed")
        }
        guard let characteristic = state.devices[peripheral]?.characteristics[uuid] else {
            throw TransportError(.characteristicNotFound, "\(peripheral.address) has no characteristic \(uuid)")
        }
        return characteristic
    }

    private func perform(
        _ operation: Operation,
        on peripheral: Peripheral,
        latency: Duration,
        hangLimit: Duration? = nil,
        body: (inout State) throws -> Void
    ) async throws {
        let at = time.now
        let script: ScriptState? = state.withLock { state in
            state.calls.append(Call(operation: operation, peripheral: peripheral, at: at))
            guard var script = state.scripts[peripheral]?[operation] else { return nil }
            if !script.always, !script.hang {
                guard script.failuresLeft > 0 else {
                    state.scripts[peripheral]?[operation] = nil
                    return nil
                }
                script.failuresLeft -= 1
                state.scripts[peripheral]?[operation] = script
            }
            return script
        }
        try await interruptible(peripheral, absentIsVanished: operation != .connect) {
            if script?.hang == true {
                if let hangLimit {
                    try await self.time.sleep(for: hangLimit)
                    throw TransportError(.timeout, "\(operation) timed out after \(hangLimit.compact)")
                }
                try await self.time.sleep(until: KeepAliveInstant(offset: .seconds(Int64.max / 4)))
            }
            if latency > .zero { try await self.time.sleep(for: latency) }
        }
        if let error = script?.error { throw error }
        try state.withLock { state in
            // Connect reports an absent device itself (deviceNotFound); other calls lost it mid-way.
            guard operation == .connect || state.devices[peripheral]?.present ?? false else {
                throw TransportError(.deviceVanished, "device \(peripheral.address) vanished")
            }
            try body(&state)
        }
    }

    /// Runs `wait` so that the device vanishing fails it at once with `deviceVanished`. With `absentIsVanished`,
    /// a device that vanished after the call was recorded but before this registration fails it the same way
    /// (a `vanish` in that gap found nothing in flight, and a hanging read then waited for ever).
    private func interruptible(
        _ peripheral: Peripheral, absentIsVanished: Bool, _ wait: @escaping @Sendable () async throws -> Void
    ) async throws {
        let vanished = Atomic(false)
        let task = Task { try await wait() }
        let cancel: @Sendable () -> Void = {
            vanished.store(true, ordering: .relaxed)
            task.cancel()
        }
        let (id, absent): (UInt64, Bool) = state.withLock { state in
            state.nextFlightID += 1
            state.inFlight[peripheral, default: [:]][state.nextFlightID] = cancel
            return (state.nextFlightID, absentIsVanished && state.devices[peripheral]?.present == false)
        }
        if absent { cancel() }
        defer { _ = state.withLock { $0.inFlight[peripheral]?.removeValue(forKey: id) } }
        try await withTaskCancellationHandler {
            do {
                try await task.value
            } catch {
                if vanished.load(ordering: .relaxed) {
                    throw TransportError(.deviceVanished, "device \(peripheral.address) vanished")
                }
                throw error
            }
        } onCancel: {
            task.cancel()
        }
    }
}

extension DiscoveryFilter {
    /// Whether `advertisement` passes this filter (addresses, RSSI, service UUIDs), as a stack would apply it.
    func admits(_ advertisement: Advertisement) -> Bool {
        (addresses.isEmpty || addresses.contains(advertisement.peripheral.address))
            && (rssi.map { (advertisement.rssi ?? .min) >= $0 } ?? true)
            && (serviceUUIDs.isEmpty || !Set(serviceUUIDs).isDisjoint(with: advertisement.serviceUUIDs))
    }
}
