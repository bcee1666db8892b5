@testable import BlueZ
import DBus
import KeepAlive
import Polling
import Testing

/// The cache's two stores: bluetoothd's GATT objects compactly, everything else (and every GATT object that form
/// cannot keep exactly) whole. Driven by signals applied to a bare `State`, so each case names its input.
@Suite("BlueZ object cache: the compact GATT store")
struct ObjectCacheTreeTests {
    static let device: ObjectPath = "/org/bluez/hci0/dev_C0_FF_EE_00_00_01"
    static let service: ObjectPath = "/org/bluez/hci0/dev_C0_FF_EE_00_00_01/service000a"
    static let characteristic: ObjectPath = "/org/bluez/hci0/dev_C0_FF_EE_00_00_01/service000a/char000b"
    static let descriptor: ObjectPath = "/org/bluez/hci0/dev_C0_FF_EE_00_00_01/service000a/char000b/desc000d"
    static let counter = BluetoothUUID(assigned: 0x2A6E)

    // The changes as the cache reads them from bluetoothd's signals (the readers themselves are tested on real
    // messages in DBusTests' ReceivedSignalTests, and end to end against the simulator and HostileBlueZ).
    static func added(_ path: ObjectPath, _ interface: String, _ properties: [String: DBusValue])
        -> BlueZObjectCache.TreeChange
    {
        .interfacesAdded(path, [(interface, properties)])
    }

    static func removed(_ path: ObjectPath, _ interfaces: [String]) -> BlueZObjectCache.TreeChange {
        .interfacesRemoved(path, interfaces)
    }

    static func changed(
        _ path: ObjectPath, _ interface: String, _ properties: [String: DBusValue], invalidated: [String] = []
    ) -> BlueZObjectCache.TreeChange {
        let changed = properties.sorted { $0.key < $1.key }.map {
            PropertiesChange.Property(name: $0.key, value: $0.value)
        }
        return .propertiesChanged(
            path, PropertiesChange(interface: interface, changed: changed, invalidated: invalidated))
    }

    static func flags(_ names: [String]) -> DBusValue { .array(element: "s", names.map { .string($0) }) }

    /// A connected device as bluetoothd 5.66 exports it: a service, a characteristic and its descriptor.
    static func bluetoothdTree(characteristic extra: [String: DBusValue] = [:]) -> BlueZObjectCache.State {
        var state = BlueZObjectCache.State()
        state.ready = true
        var characteristicProperties: [String: DBusValue] = [
            "UUID": .string(counter.description), "Service": .objectPath(service), "Value": .bytes([1, 2]),
            "Notifying": .boolean(false), "Flags": flags(["read", "notify"]), "MTU": .uint16(247),
            "Handle": .uint16(0x0b),
            "NotifyAcquired": .boolean(false),
        ]
        characteristicProperties.merge(extra) { $1 }
        for signal in [
            added(
                device, BlueZ.deviceInterface, ["Address": .string("C0:FF:EE:00:00:01"), "Connected": .boolean(true)]),
            added(
                service, BlueZ.gattServiceInterface,
                [
                    "UUID": .string(BluetoothUUID(assigned: 0x181A).description), "Device": .objectPath(device),
                    "Primary": .boolean(true),
                    "Includes": .array(element: "o", []), "Handle": .uint16(0x0a),
                ]),
            added(characteristic, BlueZ.gattCharacteristicInterface, characteristicProperties),
            added(
                descriptor, BlueZ.gattDescriptorInterface,
                [
                    "UUID": .string(BluetoothUUID(assigned: 0x2904).description),
                    "Characteristic": .objectPath(characteristic),
                    "Value": .bytes([]), "Flags": flags(["read"]),
                ]),
        ] {
            apply(signal, to: &state)
        }
        return state
    }

    static let time = TimeBase(ContinuousClock())

    static func apply(
        _ signal: BlueZObjectCache.TreeChange, to state: inout BlueZObjectCache.State, time: TimeBase = time
    ) {
        var effects = BlueZObjectCache.Effects()
        BlueZObjectCache.apply(signal, to: &state, effects: &effects, time: time)
        #expect(effects.malformed.isEmpty)
    }

    @Test func bluetoothdsGATTObjectsAreKeptCompactlyAndReadBackWhatTheTransportReads() throws {
        let state = Self.bluetoothdTree()
        #expect(state.objects.isEmpty && state.devices.keys.sorted() == [Self.device], "nothing is kept whole")
        #expect(state.gatt[Self.device]?.map(\.kind) == [.service, .characteristic, .descriptor])
        #expect(state.characteristicIndex.isEmpty && state.descriptorIndex.isEmpty)
        #expect(MemoryLayout<GattObject>.stride <= 40)

        let characteristic = try #require(state.properties(Self.characteristic, BlueZ.gattCharacteristicInterface))
        #expect(
            characteristic.values == [
                "UUID": .string(Self.counter.description), "Service": .objectPath(Self.service),
                "Notifying": .boolean(false),
                "Flags": Self.flags(["read", "notify"]), "NotifyAcquired": .boolean(false),
            ])
        #expect(
            state.properties(Self.service, BlueZ.gattServiceInterface)?.values["Device"] == .objectPath(Self.device))
        #expect(state.properties(Self.service, BlueZ.gattServiceInterface)?.values["Primary"] == .boolean(true))
        #expect(
            state.properties(Self.descriptor, BlueZ.gattDescriptorInterface)?.values["Characteristic"]
                == .objectPath(Self.characteristic))
        #expect(
            state.properties(Self.characteristic, BlueZ.gattServiceInterface) == nil,
            "a characteristic's path has no service interface")
        let absent = try Self.characteristic.appending("desc000e")
        #expect(state.hasObject(Self.descriptor) && !state.hasObject(absent))
        #expect(BlueZObjectCache.characteristicPath(Self.counter, of: Self.device, in: state) == Self.characteristic)
        #expect(BlueZObjectCache.characteristic(Self.counter, of: Self.device, in: state)?.flags == ["read", "notify"])
        #expect(
            BlueZObjectCache.characteristicPath(BluetoothUUID(assigned: 0x2904), of: Self.device, in: state) == nil,
            "a descriptor is not a characteristic")
    }

    @Test func pathsAreRebuiltAsBluetoothdWritesThem() throws {
        for path in [
            Self.service, Self.characteristic, Self.descriptor,
            "/org/bluez/hci1/dev_00_11_22_33_44_55/serviceffff/char0001",
        ] as [ObjectPath] {
            let (device, key) = try #require(GattObject.Key.locate(path))
            #expect(key.path(below: device) == path)
        }
        for path in [
            "/org/bluez/hci0/dev_C0_FF_EE_00_00_01/service000A", "/org/bluez/hci0/dev_C0_FF_EE_00_00_01/service0000",
            "/org/bluez/hci0/dev_C0_FF_EE_00_00_01/service00a", "/org/bluez/hci0/dev_C0_FF_EE_00_00_01/service000a0",
            "/org/bluez/hci0/dev_C0_FF_EE_00_00_01/service000a/desc000b",
            "/org/bluez/hci0/dev_C0_FF_EE_00_00_01/service000a/char000b/desc000d/x",
            "/org/bluez/hci0/dev_C0_FF_EE_00_00_01", "/org/bluez/hci0/dev_C0_FF_EE_00_00_01/svc000a",
        ] as [ObjectPath] {
            #expect(GattObject.Key.locate(path) == nil, "\(path)")
        }
    }

    @Test(arguments: [
        ("an unknown property", ["Weird": DBusValue.uint32(1)]),
        (
            "a flag out of bluetoothd's order",
            ["Flags": DBusValue.array(element: "s", [.string("notify"), .string("read")])]
        ),
        ("an unknown flag", ["Flags": DBusValue.array(element: "s", [.string("read"), .string("teleport")])]),
        (
            "a parent that is not the path's parent",
            ["Service": DBusValue.objectPath("/org/bluez/hci0/dev_C0_FF_EE_00_00_01/service0020")]
        ),
        ("an upper-case UUID", ["UUID": DBusValue.string("00002A6E-0000-1000-8000-00805F9B34FB")]),
        ("a Notifying that is not a boolean", ["Notifying": DBusValue.string("yes")]),
    ])
    func aCharacteristicThisFormCannotKeepExactlyIsKeptWhole(_ what: String, _ properties: [String: DBusValue]) throws {
        let state = Self.bluetoothdTree(characteristic: properties)
        #expect(state.gatt[Self.device]?.map(\.kind) == [.service, .descriptor], "\(what)")
        let whole = try #require(state.objects[Self.characteristic]?[BlueZ.gattCharacteristicInterface], "\(what)")
        for (name, value) in properties { #expect(whole.values[name] == value, "\(what): \(name)") }
        #expect(whole.values["Value"] == .bytes([1, 2]), "kept whole means every property")
        #expect(
            BlueZObjectCache.characteristicPath(Self.counter, of: Self.device, in: state) == Self.characteristic,
            "\(what)")
        #expect(state.properties(Self.characteristic, BlueZ.gattCharacteristicInterface) == whole)
    }

    @Test func aChangeItCanKeepStaysCompactAndOneItCannotMovesTheObjectWhole() throws {
        var state = Self.bluetoothdTree()
        Self.apply(
            Self.changed(
                Self.characteristic, BlueZ.gattCharacteristicInterface,
                ["Notifying": .boolean(true), "Value": .bytes([9])]), to: &state)
        #expect(state.gatt[Self.device]?.count == 3)
        #expect(
            state.properties(Self.characteristic, BlueZ.gattCharacteristicInterface)?.values["Notifying"]
                == .boolean(true))
        Self.apply(
            Self.changed(Self.characteristic, BlueZ.gattCharacteristicInterface, [:], invalidated: ["NotifyAcquired"]),
            to: &state)
        #expect(
            state.properties(Self.characteristic, BlueZ.gattCharacteristicInterface)?.values["NotifyAcquired"] == nil)
        #expect(state.gatt[Self.device]?.count == 3)

        Self.apply(
            Self.changed(
                Self.characteristic, BlueZ.gattCharacteristicInterface,
                ["Weird": .int32(-1), "Notifying": .boolean(false)]), to: &state)
        #expect(state.gatt[Self.device]?.map(\.kind) == [.service, .descriptor])
        let whole = try #require(state.objects[Self.characteristic]?[BlueZ.gattCharacteristicInterface])
        #expect(whole.values["Weird"] == .int32(-1) && whole.values["Notifying"] == .boolean(false))
        #expect(
            whole.values["UUID"] == .string(Self.counter.description)
                && whole.values["Flags"] == Self.flags(["read", "notify"]))
        #expect(BlueZObjectCache.characteristicPath(Self.counter, of: Self.device, in: state) == Self.characteristic)

        // Added again in bluetoothd's form (a reconnection): compact again, and not kept twice.
        Self.apply(
            Self.added(
                Self.characteristic, BlueZ.gattCharacteristicInterface,
                [
                    "UUID": .string(Self.counter.description), "Service": .objectPath(Self.service),
                    "Flags": Self.flags(["read"]),
                ]), to: &state)
        #expect(state.objects[Self.characteristic] == nil && state.characteristicIndex[Self.device]?.isEmpty != false)
        #expect(state.gatt[Self.device]?.map(\.kind) == [.service, .characteristic, .descriptor])
    }

    @Test func anotherGATTInterfaceAtACharacteristicsPathIsKeptWholeBesideIt() throws {
        var state = Self.bluetoothdTree()
        let odd: [String: DBusValue] = ["UUID": .string(Self.counter.description), "Device": .objectPath(Self.device)]
        Self.apply(Self.added(Self.characteristic, BlueZ.gattServiceInterface, odd), to: &state)
        #expect(
            state.gatt[Self.device]?.map(\.kind) == [.service, .characteristic, .descriptor], "the characteristic stays"
        )
        #expect(state.objects[Self.characteristic]?[BlueZ.gattServiceInterface]?.values == odd)
        Self.apply(Self.removed(Self.characteristic, [BlueZ.gattServiceInterface]), to: &state)
        #expect(state.objects[Self.characteristic] == nil)
        #expect(BlueZObjectCache.characteristicPath(Self.counter, of: Self.device, in: state) == Self.characteristic)
    }

    @Test func aChangeOfAnObjectNotInTheTreeBringsNothingBack() {
        var state = Self.bluetoothdTree()
        Self.apply(Self.removed(Self.descriptor, [BlueZ.gattDescriptorInterface]), to: &state)
        Self.apply(Self.changed(Self.descriptor, BlueZ.gattDescriptorInterface, ["Value": .bytes([1])]), to: &state)
        Self.apply(
            Self.changed(Self.characteristic, BlueZ.gattServiceInterface, ["Primary": .boolean(true)]), to: &state)
        #expect(!state.hasObject(Self.descriptor))
        #expect(state.gatt[Self.device]?.map(\.kind) == [.service, .characteristic])
        #expect(state.objects.isEmpty && state.devices.keys.sorted() == [Self.device])
    }

    @Test func removingTheDeviceForgetsItsGATTObjectsInBothStores() {
        var state = Self.bluetoothdTree(characteristic: ["Weird": .boolean(true)])
        #expect(state.characteristicIndex[Self.device] != nil)
        Self.apply(Self.removed(Self.device, [BlueZ.deviceInterface]), to: &state)
        #expect(state.gatt[Self.device] == nil && state.characteristicIndex[Self.device] == nil)
        #expect(BlueZObjectCache.characteristicPath(Self.counter, of: Self.device, in: state) == nil)
        #expect(!state.hasObject(Self.device))
    }

    @Test func objectsAreKeptInPathOrderWhateverOrderTheyCameIn() {
        var state = BlueZObjectCache.State()
        let handles: [(UInt16, UInt16)] = [
            (0x20, 0x22), (0x0a, 0), (0x20, 0), (0x0a, 0x0c), (0x20, 0x21), (0x0a, 0x0b),
        ]
        for (service, characteristic) in handles {
            let key = GattObject.Key(service: service, characteristic: characteristic)
            let path = key.path(below: Self.device)
            if characteristic == 0 {
                Self.apply(
                    Self.added(
                        path, BlueZ.gattServiceInterface,
                        ["UUID": .string(Self.counter.description), "Device": .objectPath(Self.device)]), to: &state)
            } else {
                let parent = GattObject.Key(service: service).path(below: Self.device)
                Self.apply(
                    Self.added(
                        path, BlueZ.gattCharacteristicInterface,
                        ["UUID": .string(Self.counter.description), "Service": .objectPath(parent)]), to: &state)
            }
        }
        let paths = state.gatt[Self.device]?.map { $0.key.path(below: Self.device) } ?? []
        #expect(paths == paths.sorted() && paths.count == handles.count)
        #expect(
            BlueZObjectCache.characteristicPath(Self.counter, of: Self.device, in: state)?.rawValue.hasSuffix(
                "service000a/char000b") == true, "the lowest handle")
    }
}
