import DBus
import Basics

// The simulator's state: one value behind one lock (SimulatorEngine.model). Property getters read it without
// suspending, which keeps GetManagedObjects of 10,000 devices fast; behaviour mutates it in short critical
// sections and sends signals outside them.

struct Model {
    /// The connection owning org.bluez; nil while "bluetoothd" is down (crashed, restarting, stopped).
    var connection: DBusConnection?
    /// Bumped by every crash, restart and stop: work started for an older generation does nothing.
    var generation = 0
    /// Links the kernel kept when bluetoothd crashed: the next bluetoothd finds them up (Connected=true, no
    /// ServicesResolved) until the kernel drops them.
    var kernelLinks: Set<ObjectPath> = []
    var adapters: [String: AdapterState] = [:]
    var adapterOrder: [String] = []
    var devices: [ObjectPath: DeviceState] = [:]
    var devicePathsByAddress: [String: ObjectPath] = [:]
    var characteristics: [ObjectPath: CharacteristicState] = [:]
    /// The passive sensors (devices with an advertisement), in the order they were added: an array, scanned in
    /// place, so that a round of 2,000 of them costs no copy of a device.
    var advertisers: [AdvertiserState] = []
    /// Registered agents, by the client's unique name.
    var agents: [String: ObjectPath] = [:]
    var callCounts: [String: Int] = [:]
    var background: [Task<Void, Never>] = []
}

struct AdapterState {
    let configuration: SimulatedAdapter
    let path: ObjectPath
    var powered: Bool
    var blocked = false
    var alias: String
    var discoverable = false
    var pairable = true
    var discoverySessions: Set<String> = []
    /// SetDiscoveryFilter, by client: they count while the client discovers (bluetoothd's discovery list).
    var discoveryFilters: [String: ClientDiscoveryFilter] = [:]
    var discoveryTask: Task<Void, Never>?
    /// A wedged controller: every Connect through it aborts until it is powered off (issue #15's fault).
    var wedged = false
    /// A stuck scan: discovery runs (Discovering=true) but finds nothing until the adapter is powered off.
    var discoveryStuck = false
    /// Times it was powered off and on again (by anyone), for tests of the healing ladder.
    var powerCycles = 0

    var discovering: Bool { !discoverySessions.isEmpty }
    /// Some discovering client asked for DuplicateData: every advertisement's data is reported, changed or not.
    var duplicateData: Bool { discoverySessions.contains { discoveryFilters[$0]?.duplicateData == true } }
    /// Some discovering client set a filter: bluetoothd then reports every RSSI (no 8 dBm threshold).
    var filteredDiscovery: Bool { discoverySessions.contains { discoveryFilters[$0] != nil } }
    var powerState: String { blocked ? "off-blocked" : powered ? "on" : "off" }
}

/// What of a client's SetDiscoveryFilter the simulator acts on.
struct ClientDiscoveryFilter: Sendable, Hashable {
    var duplicateData = false
}

/// A passive sensor's advertising: how many it sent, when the next is due, the last measurement's packet.
struct AdvertiserState {
    let path: ObjectPath
    let adapter: String
    let profile: SimulatedAdvertisement
    /// The device's address as six bytes in written order.
    let address: [UInt8]
    var sent: UInt64 = 0
    var due: ContinuousClock.Instant?
    var packet: (measurement: UInt64, packet: AdvertisedPacket)?
}

struct FaultState: Sendable {
    var connectAborts = 0
    var inProgress = false
    var readHang = false
    var attError: UInt8?
    /// A zombie link: notifications stop while Connected stays true, until the link drops.
    var silentNotifications = false
}

struct DeviceState {
    var configuration: SimulatedDevice
    let path: ObjectPath
    let adapterPath: ObjectPath
    let services: [ServiceLayout]
    var exported = false
    var advertising: Bool
    var connected = false
    var servicesResolved = false
    /// The GATT objects exist on the bus (created on the first connection, cached afterwards).
    var gattExported = false
    var batteryExported = false
    /// The RSSI property: present while discovering and the device advertises.
    var rssi: Int16?
    var pendingConnect: Promise<Void>?
    /// Bumped on every link up and down, so that a late timer cannot act on a newer link.
    var link = 0
    var paired: Bool
    var trusted: Bool
    var blocked = false
    var faults = FaultState()
    /// ServiceData and ManufacturerData as bluetoothd holds them: the configured ones, then what advertisements
    /// brought.
    var serviceData: [String: [UInt8]] = [:]
    var manufacturerData: [UInt16: [UInt8]] = [:]
    /// The Mi Flora's stored history (a device with `SimulatedService.miFloraHistory`); it outlives links and
    /// bluetoothd restarts, as the sensor's flash does.
    var history: HistoryState?
    /// A settable clock (the LYWSD03MMC's time characteristic); it runs on between links.
    var clock: ClockState?

    var batteryService: ServiceLayout? {
        services.first { $0.uuid == SimulatedUUID.full("180F") }
    }

    /// Takes the device off the bus (vanished, or bluetoothd gone): link down, nothing exported, a pending
    /// Connect handed back to be failed. The link counter moves so late timers see a newer link.
    mutating func unexport() -> Promise<Void>? {
        defer {
            pendingConnect = nil
            exported = false
            gattExported = false
            batteryExported = false
            connected = false
            servicesResolved = false
            rssi = nil
            link += 1
        }
        return pendingConnect
    }
}

/// A service's place in the attribute database.
struct ServiceLayout: Sendable {
    let path: ObjectPath
    let uuid: String
    let primary: Bool
    let handle: UInt16
    let characteristics: [ObjectPath]
    /// Claimed by the battery plugin: not exported over D-Bus.
    let claimed: Bool
}

struct CharacteristicState {
    let configuration: SimulatedCharacteristic
    let path: ObjectPath
    let servicePath: ObjectPath
    let devicePath: ObjectPath
    let handle: UInt16
    /// The Client Characteristic Configuration descriptor (0x2902) of a notify/indicate characteristic.
    let descriptorPath: ObjectPath?
    /// The configured descriptors after the CCCD, in handle order.
    var descriptors: [DescriptorLayout] = []
    /// The descriptors' Value properties: what the last read (or write) left, as bluetoothd caches it.
    var descriptorValues: [ObjectPath: [UInt8]] = [:]
    /// What clients wrote to writable configured descriptors.
    var descriptorWrites: [ObjectPath: [UInt8]] = [:]
    var value: [UInt8] = []
    var written: [UInt8]?
    /// The device's link when `written` was written: a characteristic that forgets writes on disconnect
    /// ignores a value from an older link (link numbers move on every link up and down).
    var writtenOnLink: Int?
    var readSequence: UInt64 = 0
    var notifySequence: UInt64 = 0
    /// Notify sessions, by the client's unique name.
    var sessions: Set<String> = []
    var pendingRead: (offset: UInt16, promise: Promise<[UInt8]>)?
    var notifier: Task<Void, Never>?

    var notifying: Bool { !sessions.isEmpty }

    /// Every descriptor object of the characteristic, in handle order (the CCCD first).
    var descriptorPaths: [ObjectPath] { (descriptorPath.map { [$0] } ?? []) + descriptors.map(\.path) }

    /// What the client wrote, if it still counts on the device's current `link`.
    func written(onLink link: Int) -> [UInt8]? {
        guard configuration.forgetsWritesOnDisconnect else { return written }
        return writtenOnLink == link ? written : nil
    }
}

/// A configured descriptor's place in the attribute database.
struct DescriptorLayout: Sendable {
    let configuration: SimulatedDescriptor
    let path: ObjectPath
    let handle: UInt16
}

extension Model {
    /// Whether a client wrote `required.bytes` to the device's characteristic `required.characteristic` (on the
    /// current link, when that characteristic forgets writes on disconnect).
    func requiredWriteDone(_ required: SimulatedCharacteristic.RequiredWrite, device devicePath: ObjectPath) -> Bool {
        guard let device = devices[devicePath] else { return false }
        let target = device.services.flatMap(\.characteristics).lazy.compactMap { characteristics[$0] }
            .first { $0.configuration.uuid == required.characteristic }
        return target?.written(onLink: device.link) == required.bytes
    }

    /// Forgets everything that lives only while bluetoothd runs; returns what must be failed or cancelled.
    mutating func resetRuntimeState(_ error: DBusError) -> [Promise<Void>] {
        var promises: [Promise<Void>] = []
        connection = nil
        generation += 1
        agents.removeAll()
        for task in background { task.cancel() }
        background.removeAll()
        for name in adapterOrder {
            adapters[name]?.discoveryTask?.cancel()
            adapters[name]?.discoveryTask = nil
            adapters[name]?.discoverySessions.removeAll()
            adapters[name]?.discoveryFilters.removeAll()
            resetAdvertising(adapter: name)
        }
        for path in devices.keys {
            guard var device = devices[path] else { continue }
            if let pending = device.unexport() { promises.append(pending) }
            devices[path] = device
        }
        for path in characteristics.keys {
            guard var characteristic = characteristics[path] else { continue }
            characteristic.notifier?.cancel()
            characteristic.notifier = nil
            characteristic.sessions.removeAll()
            if let pending = characteristic.pendingRead { pending.promise.complete(.failure(error)) }
            characteristic.pendingRead = nil
            characteristics[path] = characteristic
        }
        return promises
    }
}
