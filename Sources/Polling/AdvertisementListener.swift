package import KeepAlive
package import Logging
import Basics
package import Readings

/// Listens to the advertisements of the devices that need them (passive sensors, polls gated on hearing a
/// device) and keeps, per device, what it heard since the device's last tick: how often, how strong, and the
/// newest measurement decoded.
///
/// One discovery per adapter (``PeripheralTransport/discover(on:filter:)`` with `DuplicateData` and the
/// configured addresses): a neighbour that is not configured costs the transport a lookup, never a decode. A
/// repeat of the bytes last heard from a device counts as heard and is not decoded again, so a sensor repeating
/// one measurement ten times a second costs a comparison per repeat.
///
/// Listening starts with the first tick that needs it and keeps going until ``stop()``: a discovery that fails
/// (the adapter not there yet, bluetoothd restarting) is tried again after 1 s, doubling to 30 s, and the
/// log says so once per outage.
package final class AdvertisementListener: Sendable {
    /// What a device's tick takes: what was heard since the last take.
    package struct Heard: Sendable, Hashable {
        /// Advertisements heard (repeats included).
        package var count: Int
        /// The last signal strength heard; `nil` when the stack gave none (or 127, HCI's "not available").
        package var rssi: Int16?
        /// The newest measurement decoded, ever (the readings a tick with nothing new still shows).
        package var payload: AdvertisementPayload?
        /// Whether ``payload`` is newer than the one the last take returned.
        package var isNew = false
        /// The newest measurement's packet id, new or not.
        package var packetID: UInt32?
        /// Why the last advertisement that could not be used was refused (a wrong key, a replayed counter), when
        /// nothing usable came after it.
        package var refusal: AdvertisementError?
        /// When the device was last heard, ever.
        package var lastHeard: KeepAliveInstant?
    }

    private struct DeviceState: Sendable {
        let spec: PeripheralSpec
        let address: BluetoothAddress?
        var replay = ReplayGuard()
        /// The bytes last decoded (or refused), per source: a repeat is not decoded again.
        var lastBytes: [AdvertisementSource: [UInt8]] = [:]
        var heard = 0
        var rssi: Int16?
        var lastHeard: KeepAliveInstant?
        var latest: AdvertisementPayload?
        var latestIsNew = false
        var refusal: AdvertisementError?
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }

    private struct State: Sendable {
        /// By address, then by adapter (one address may be configured on two adapters).
        var devices: [String: [String: DeviceState]] = [:]
        var started = false
        var stopped = false
        var nextWaiter: UInt64 = 0
        var tasks: [Task<Void, Never>] = []
    }

    let transport: any PeripheralTransport
    let decoder: AdvertisementDecoder
    let time: TimeBase
    let logger: Logger
    private let state: Locked<State>
    /// The adapters listened on, and the addresses on each.
    private let adapters: [String: Set<String>]

    /// A listener for the devices of `specs` that listen to advertisements (the others are ignored).
    package init(
        specs: [PeripheralSpec], transport: any PeripheralTransport, decoder: AdvertisementDecoder,
        time: TimeBase, logger: Logger
    ) {
        self.transport = transport
        self.decoder = decoder
        self.time = time
        self.logger = logger
        var state = State()
        var adapters: [String: Set<String>] = [:]
        for spec in specs where spec.listensToAdvertisements {
            let address = spec.peripheral.address.uppercased()
            state.devices[address, default: [:]][spec.peripheral.adapter] = DeviceState(
                spec: spec, address: try? BluetoothAddress(parsing: address))
            adapters[spec.peripheral.adapter, default: []].insert(address)
        }
        self.state = Locked(state)
        self.adapters = adapters
    }

    /// Whether any device listens.
    package var isEmpty: Bool { adapters.isEmpty }

    /// Starts one discovery per adapter, once; later calls do nothing.
    package func start() {
        let starting = state.withLock { state -> Bool in
            guard !state.started, !state.stopped else { return false }
            state.started = true
            return true
        }
        guard starting else { return }
        var tasks: [Task<Void, Never>] = []
        for (adapter, addresses) in adapters.sorted(by: { $0.key < $1.key }) {
            tasks.append(
                Task(executorPreference: transport.preferredExecutor) { [weak self] in
                    await self?.listen(on: adapter, addresses: addresses)
                })
        }
        state.withLock { $0.tasks = tasks }
    }

    /// Stops listening; waiters are woken.
    package func stop() {
        let (tasks, waiters) = state.withLock { state in
            state.stopped = true
            defer { state.tasks = [] }
            var waiters: [CheckedContinuation<Void, Never>] = []
            for address in Array(state.devices.keys) {
                for adapter in Array(state.devices[address, default: [:]].keys) {
                    waiters += state.devices[address]?[adapter]?.waiters.values.map { $0 } ?? []
                    state.devices[address]?[adapter]?.waiters = [:]
                }
            }
            return (state.tasks, waiters)
        }
        for task in tasks { task.cancel() }
        for waiter in waiters { waiter.resume() }
    }

    deinit {
        for task in state.withLock({ $0.tasks }) { task.cancel() }
    }

    private func listen(on adapter: String, addresses: Set<String>) async {
        let filter = DiscoveryFilter(duplicateData: true, addresses: addresses, heardOnly: true)
        var delay = Duration.seconds(1)
        var failing = false
        while !Task.isCancelled {
            do {
                var announced = false
                for try await advertisement in transport.discover(on: adapter, filter: filter) {
                    if !announced {
                        announced = true
                        delay = .seconds(1)
                        if failing {
                            failing = false
                            logger.notice("listening for advertisements again", metadata: ["adapter": "\(adapter)"])
                        } else {
                            logger.info(
                                "hearing advertisements",
                                metadata: [
                                    "adapter": "\(adapter)", "devices": "\(addresses.count)",
                                    "mode": "active discovery, DuplicateData",
                                ])
                        }
                    }
                    hear(advertisement)
                }
                if Task.isCancelled { return }
                logger.info("advertisement listening ended; starting again", metadata: ["adapter": "\(adapter)"])
            } catch {
                if Task.isCancelled { return }
                if !failing {
                    failing = true
                    logger.warning(
                        "listening for advertisements failed; trying again",
                        metadata: ["adapter": "\(adapter)", "error": "\(error)", "delay": "\(delay.compact)"])
                }
            }
            do { try await time.sleep(for: delay) } catch { return }
            delay = min(delay * 2, .seconds(30))
        }
    }

    /// Takes in one advertisement (the listening's own path; tests may call it directly).
    package func hear(_ advertisement: Advertisement) {
        let address = advertisement.peripheral.address
        let adapter = advertisement.peripheral.adapter
        let now = time.now
        let waiters: [CheckedContinuation<Void, Never>] = state.withLock { state in
            guard var device = state.devices[address]?[adapter] else { return [] }
            device.heard += 1
            device.lastHeard = now
            if let rssi = advertisement.rssi, rssi != 127 { device.rssi = rssi }
            for (source, bytes) in Self.elements(of: advertisement) {
                decode(bytes, from: source, into: &device)
            }
            let waiters = Array(device.waiters.values)
            device.waiters = [:]
            state.devices[address]?[adapter] = device
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Each service-data and manufacturer-data element with the source it came from.
    private static func elements(of advertisement: Advertisement) -> [(AdvertisementSource, [UInt8])] {
        var elements: [(AdvertisementSource, [UInt8])] = []
        for (uuid, bytes) in advertisement.serviceData {
            if let short = uuid.assignedNumber { elements.append((.serviceData(uuid16: short), bytes)) }
        }
        for (company, bytes) in advertisement.manufacturerData {
            elements.append((.manufacturerData(companyID: company), bytes))
        }
        return elements
    }

    private func decode(_ bytes: [UInt8], from source: AdvertisementSource, into device: inout DeviceState) {
        // Only the formats the device is configured for; data of other kinds (a vendor's beacon) is not its.
        guard let format = AdvertisementDecoder.format(of: source, bytes: bytes),
            device.spec.advertising?.format.map({ $0 == format }) ?? true
        else { return }
        guard device.lastBytes[source] != bytes else { return }
        device.lastBytes[source] = bytes
        guard let address = device.address else { return }
        do {
            let payload = try decoder.decode(
                bytes, from: source, address: address, key: device.spec.advertising?.key,
                replayGuard: &device.replay)
            device.refusal = nil
            if payload.isRepeat { return }
            if let id = payload.packetID, let latest = device.latest, latest.packetID == id,
                latest.format == payload.format
            {
                return
            }
            device.latest = payload
            device.latestIsNew = true
        } catch {
            if device.refusal == nil {
                logger.warning(
                    "advertisement refused",
                    metadata: ["device": "\(device.spec.name)", "error": "\(error)"])
            }
            device.refusal = error
        }
    }

    /// What was heard from `device` on `adapter` since the last take, and starts counting afresh.
    package func take(address: String, adapter: String) -> Heard {
        state.withLock { state in
            guard var device = state.devices[address.uppercased()]?[adapter] else {
                return Heard(count: 0)
            }
            let heard = Heard(
                count: device.heard, rssi: device.rssi, payload: device.latest, isNew: device.latestIsNew,
                packetID: device.latest?.packetID, refusal: device.refusal, lastHeard: device.lastHeard)
            device.heard = 0
            device.latestIsNew = false
            state.devices[address.uppercased()]?[adapter] = device
            return heard
        }
    }

    /// Heard since the last take.
    package func heardCount(address: String, adapter: String) -> Int {
        state.withLock { $0.devices[address.uppercased()]?[adapter]?.heard ?? 0 }
    }

    /// When `address` was last heard on `adapter`.
    package func lastHeard(address: String, adapter: String) -> KeepAliveInstant? {
        state.withLock { $0.devices[address.uppercased()]?[adapter]?.lastHeard }
    }

    /// Waits until `address` is heard on `adapter` (at once when it was since the last take), the deadline
    /// passes, or the task is cancelled; true when heard.
    package func waitHeard(address: String, adapter: String, until deadline: KeepAliveInstant) async -> Bool {
        let key = address.uppercased()
        if heardCount(address: key, adapter: adapter) > 0 { return true }
        let time = self.time
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask { await self.heardSignal(address: key, adapter: adapter) }
            group.addTask {
                let left = time.now.duration(to: deadline)
                if left > .zero { try? await time.sleep(for: left) }
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first || self.heardCount(address: key, adapter: adapter) > 0
        }
    }

    /// Returns when the device is next heard (or listening stops, or the task is cancelled).
    private func heardSignal(address: String, adapter: String) async -> Bool {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let registered = state.withLock { state -> Bool in
                    guard !state.stopped, !Task.isCancelled, state.devices[address]?[adapter] != nil,
                        state.devices[address]?[adapter]?.heard == 0
                    else { return false }
                    state.devices[address]?[adapter]?.waiters[id] = continuation
                    return true
                }
                if !registered { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.devices[address]?[adapter]?.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
        return heardCount(address: address, adapter: adapter) > 0
    }
}
