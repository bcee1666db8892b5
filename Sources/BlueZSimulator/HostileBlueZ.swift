public import DBus
import Basics
public import Logging

/// An `org.bluez` that gets every type wrong: the simulator's hostile mode (`bluez-sim --hostile`).
///
/// It has the shape of bluetoothd — an object manager at `/`, an adapter, devices with a GATT characteristic
/// and Battery1 — so a client finds what it looks for, but every method (Connect, ReadValue, StartNotify,
/// StartDiscovery…) accepts anything and answers with a randomly chosen wrong signature, properties come with
/// the wrong types (Address as a number, RSSI as a string, Value as a string…), and signals with wrong bodies
/// (PropertiesChanged, InterfacesAdded, InterfacesRemoved) keep coming. So that a client gets as far as those
/// method calls, the properties it checks before calling (the adapter's Powered; Connected, ServicesResolved,
/// UUID, Flags of every other device) are right; on the others they are wrong too. A client must report typed
/// errors and never trap. Answers are drawn from a seeded generator, so a run can be repeated.
///
/// ```swift
/// let hostile = try await HostileBlueZ.start(on: .address(bus.address), devices: ["C0:FF:EE:00:00:01"], seed: 7)
/// defer { Task { await hostile.stop() } }
/// ```
public final class HostileBlueZ: Sendable {
    private let connection: DBusConnection
    private let random: Locked<SplitMix64>
    private let calls = Locked(0)
    private let signals: Locked<Task<Void, Never>?> = Locked(nil)
    private let devices: [ObjectPath]

    /// Method calls answered so far.
    public var callCount: Int { calls.withLock { $0 } }

    /// Owns `org.bluez` on `bus` with adapter `hci0` and one device per address; emits a hostile signal every
    /// `signalInterval`.
    public static func start(
        on bus: DBusConnection.Bus, devices addresses: [String], seed: UInt64 = 1,
        signalInterval: Duration = .milliseconds(50), logger: Logger = Logger(label: "bluez-sim")
    ) async throws -> HostileBlueZ {
        let connection = try await DBusConnection(bus: bus)
        let devices = try addresses.map { try ObjectPath("/org/bluez/hci0/dev_" + $0.uppercased().replacingColons()) }
        let hostile = HostileBlueZ(connection: connection, devices: devices, seed: seed)
        do {
            await connection.addObjectManager(at: "/")
            try await connection.export(hostile.adapter(), at: "/org/bluez/hci0")
            for (index, device) in devices.enumerated() {
                let plausible = index % 2 == 0
                try await connection.export(hostile.device(plausible: plausible), at: device)
                try await connection.export(
                    hostile.characteristic(device, plausible: plausible),
                    at: try ObjectPath(device.rawValue + "/service000a/char000b"))
            }
            guard try await connection.requestName("org.bluez") == .primaryOwner else {
                throw BlueZSimulatorError.nameTaken("org.bluez")
            }
        } catch {
            await connection.close()
            throw error
        }
        logger.notice(
            "hostile org.bluez: every type wrong", metadata: ["devices": "\(devices.count)", "seed": "\(seed)"])
        hostile.signals.withLock { $0 = Task { await hostile.emitSignals(every: signalInterval) } }
        return hostile
    }

    private init(connection: DBusConnection, devices: [ObjectPath], seed: UInt64) {
        self.connection = connection
        self.devices = devices
        self.random = Locked(SplitMix64(seed: seed))
    }

    /// Releases org.bluez and closes the connection.
    public func stop() async {
        let task = signals.withLock { task in
            defer { task = nil }
            return task
        }
        task?.cancel()
        _ = await task?.value
        await connection.close()
    }

    // MARK: Objects

    private func adapter() -> DBusObject {
        DBusObject(interfaces: [
            DBusInterface(
                "org.bluez.Adapter1",
                methods: hostileMethods([
                    "StartDiscovery", "StopDiscovery", "SetDiscoveryFilter", "RemoveDevice", "GetDiscoveryFilters",
                ]),
                properties: [
                    DBusProperty("Address", signature: "u", get: { .uint32(0xDEAD) }),
                    DBusProperty("Powered", signature: "b", get: { .boolean(true) }),
                    DBusProperty("PowerState", signature: "b", get: { .boolean(true) }),
                    DBusProperty("Discovering", signature: "as", get: { .array(element: "s", [.string("true")]) }),
                    DBusProperty("Roles", signature: "s", get: { .string("central") }),
                    DBusProperty("Alias", signature: "ay", get: { .bytes([0xff, 0x00]) }),
                ])
        ])
    }

    private func device(plausible: Bool) -> DBusObject {
        DBusObject(interfaces: [
            DBusInterface(
                "org.bluez.Device1",
                methods: hostileMethods(["Connect", "Disconnect", "Pair", "ConnectProfile", "CancelPairing"]),
                properties: [
                    DBusProperty("Address", signature: "i", get: { .int32(-1) }),
                    DBusProperty("Adapter", signature: "s", get: { .string("/org/bluez/hci0") }),
                    plausible
                        ? DBusProperty("Connected", signature: "b", get: { .boolean(true) })
                        : DBusProperty("Connected", signature: "s", get: { .string("true") }),
                    plausible
                        ? DBusProperty("ServicesResolved", signature: "b", get: { .boolean(true) })
                        : DBusProperty("ServicesResolved", signature: "y", get: { .byte(1) }),
                    DBusProperty("UUIDs", signature: "s", get: { .string("0000180f-0000-1000-8000-00805f9b34fb") }),
                    DBusProperty("RSSI", signature: "s", get: { .string("-40") }),
                    DBusProperty("Name", signature: "u", get: { .uint32(7) }),
                    DBusProperty(
                        "ManufacturerData", signature: "a{sv}",
                        get: {
                            .dictionary(
                                key: "s", value: "v",
                                [DBusDictionaryEntry(key: .string("76"), value: .variant(.int64(1)))])
                        }),
                    DBusProperty("ServiceData", signature: "as", get: { .array(element: "s", []) }),
                ]),
            DBusInterface(
                "org.bluez.Battery1",
                properties: [DBusProperty("Percentage", signature: "s", get: { .string("87%") })]),
        ])
    }

    private func characteristic(_ device: ObjectPath, plausible: Bool) -> DBusObject {
        DBusObject(interfaces: [
            DBusInterface(
                "org.bluez.GattCharacteristic1",
                methods: hostileMethods([
                    "ReadValue", "WriteValue", "StartNotify", "StopNotify", "AcquireNotify", "AcquireWrite",
                ]),
                properties: [
                    plausible
                        ? DBusProperty("UUID", signature: "s", get: { .string(Self.counter) })
                        : DBusProperty("UUID", signature: "ay", get: { .bytes([0x2a, 0x19]) }),
                    plausible
                        ? DBusProperty(
                            "Service", signature: "o",
                            get: { .objectPath(try ObjectPath(device.rawValue + "/service000a")) })
                        : DBusProperty("Service", signature: "s", get: { .string(device.rawValue) }),
                    plausible
                        ? DBusProperty(
                            "Flags", signature: "as",
                            get: { .array(element: "s", [.string("read"), .string("write"), .string("notify")]) })
                        : DBusProperty("Flags", signature: "s", get: { .string("read,notify") }),
                    DBusProperty("Value", signature: "s", get: { .string("not bytes") }),
                    DBusProperty("Notifying", signature: "ay", get: { .bytes([1]) }),
                ])
        ])
    }

    /// The simulator's counter characteristic, so that a client configured for the simulator finds it.
    static let counter = SimulatedUUID.counter

    /// Methods that take any arguments and answer with a wrong signature.
    private func hostileMethods(_ names: [String]) -> [DBusMethod] {
        names.map { name in
            DBusMethod(name, in: nil, out: nil) { [self] _ in
                calls.withLock { $0 += 1 }
                return random.withLock { Self.wrongAnswer(to: name, &$0) }
            }
        }
    }

    // MARK: Wrong answers and signals

    /// What BlueZ answers to `method`: the one reply ``wrongAnswer(to:_:)`` never gives.
    static func rightSignature(of method: String) -> DBusSignature {
        switch method {
        case "ReadValue": "ay"
        case "GetDiscoveryFilters": "as"
        case "AcquireNotify", "AcquireWrite": "hq"
        default: ""
        }
    }

    /// A reply of another signature than BlueZ's to `method` (nothing, for ReadValue, is one of them).
    static func wrongAnswer(to method: String, _ random: inout SplitMix64) -> [DBusValue] {
        let right = rightSignature(of: method)
        var answer = anyAnswer(&random)
        while answer.signature == right { answer = anyAnswer(&random) }
        return answer
    }

    private static func anyAnswer(_ random: inout SplitMix64) -> [DBusValue] {
        switch random.next() % 12 {
        case 0: return []
        case 1: return [.string("hostile")]
        case 2: return [.int32(-1)]
        case 3: return [.array(element: "i", [.int32(1), .int32(2)])]
        case 4: return [.variant(.variant(.variant(.byte(1))))]
        case 5: return [.structure([.string("x"), .uint64(.max)])]
        case 6:
            return [
                .dictionary(key: "s", value: "s", [DBusDictionaryEntry(key: .string("Value"), value: .string("01"))])
            ]
        case 7: return [.objectPath("/nowhere")]
        case 8: return [.boolean(true), .string("extra")]
        case 9: return [.double(.nan)]
        case 10: return [.bytes([1, 2, 3]), .bytes([4])]
        default:
            var nested = DBusValue.bytes([0])
            for _ in 0..<32 { nested = .array(element: "v", [.variant(nested)]) }
            return [nested]
        }
    }

    private func emitSignals(every interval: Duration) async {
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
            guard
                let device = devices.isEmpty ? nil : devices[Int(random.withLock { $0.next() } % UInt64(devices.count))]
            else {
                continue
            }
            let choice = random.withLock { $0.next() } % 5
            let (path, interface, member, arguments): (ObjectPath, String, String, [DBusValue]) =
                switch choice {
                case 0:
                    (
                        device, "org.freedesktop.DBus.Properties", "PropertiesChanged",
                        [
                            .string("org.bluez.Device1"),
                            .dictionary(
                                key: "s", value: "v",
                                [
                                    DBusDictionaryEntry(key: .string("Connected"), value: .variant(.string("false"))),
                                    DBusDictionaryEntry(key: .string("ServicesResolved"), value: .variant(.int64(1))),
                                ]),
                            .array(element: "s", []),
                        ]
                    )
                case 1:
                    (
                        device, "org.freedesktop.DBus.Properties", "PropertiesChanged",
                        [.string("org.bluez.Device1"), .int32(1)]
                    )
                case 2:
                    ("/", "org.freedesktop.DBus.ObjectManager", "InterfacesAdded", [.string(device.rawValue)])
                case 3:
                    (
                        "/", "org.freedesktop.DBus.ObjectManager", "InterfacesRemoved",
                        [.objectPath(device), .string("org.bluez.Device1")]
                    )
                default:
                    (
                        try! ObjectPath(device.rawValue + "/service000a/char000b"), "org.freedesktop.DBus.Properties",
                        "PropertiesChanged",
                        [
                            .string("org.bluez.GattCharacteristic1"),
                            .dictionary(
                                key: "s", value: "v",
                                [DBusDictionaryEntry(key: .string("Value"), value: .variant(.uint32(7)))]),
                            .array(element: "s", []),
                        ]
                    )
                }
            try? await connection.emitSignal(path: path, interface: interface, member: member, arguments: arguments)
        }
    }
}

extension String {
    fileprivate func replacingColons() -> String {
        String(map { $0 == ":" ? "_" : $0 })
    }
}
