@testable import BlueZ
import DBus
import KeepAlive
import Polling
import Basics
import Testing

/// The cache's compact `Device1`: whatever bluetoothd sends, it reads back exactly what `BlueZProperties` would
/// hold for the same signals, and what bluetoothd sends on every device is kept in typed fields.
@Suite("BlueZ object cache: the compact Device1")
struct DeviceObjectTests {
    static let path: ObjectPath = "/org/bluez/hci0/dev_C0_FF_EE_00_00_01"
    static let battery = BluetoothUUID(assigned: 0x180F).description
    static let custom = "4b410001-6b65-6570-616c-697665000000"

    /// A device as bluetoothd 5.66 exports it after a scan and a connection.
    static let bluetoothd: [String: DBusValue] = [
        "Address": .string("C0:FF:EE:00:00:01"), "AddressType": .string("public"), "Name": .string("greenhouse-3"),
        "Alias": .string("greenhouse-3"), "Class": .uint32(0x1F00), "Appearance": .uint16(0x0540),
        "Icon": .string("unknown"),
        "Paired": .boolean(false), "Bonded": .boolean(false), "Trusted": .boolean(true), "Blocked": .boolean(false),
        "LegacyPairing": .boolean(false), "RSSI": .int16(-61), "TxPower": .int16(4), "Connected": .boolean(true),
        "UUIDs": .array(element: "s", [.string(battery), .string(custom)]), "Modalias": .string("usb:v1D6Bp0246d0537"),
        "Adapter": .objectPath("/org/bluez/hci0"),
        "ManufacturerData": .dictionary(
            key: "q", value: "v", [DBusDictionaryEntry(key: .uint16(0x0499), value: .variant(.bytes([5, 1])))]),
        "ServiceData": .dictionary(
            key: "s", value: "v",
            [
                DBusDictionaryEntry(key: .string(battery), value: .variant(.bytes([88]))),
                DBusDictionaryEntry(key: .string(custom), value: .variant(.bytes([]))),
            ]),
        "ServicesResolved": .boolean(true), "AdvertisingFlags": .bytes([0x06]), "WakeAllowed": .boolean(false),
    ]

    @Test func eachFlagIsFoundByItsPropertyNameExactly() {
        for flag in DeviceObject.Flag.allCases { #expect(DeviceObject.Flag(name: flag.name) == flag) }
        for name in ["connected", "CONNECTED", "Connected ", "", "Name"] {
            #expect(DeviceObject.Flag(name: name) == nil, "\(name)")
        }
    }

    @Test func bluetoothdsDeviceIsKeptTypedAndReadsBackExactly() {
        let device = DeviceObject(at: Self.path, Self.bluetoothd)
        #expect(device.properties(at: Self.path) == BlueZProperties(Self.bluetoothd))
        #expect(Set(device.others.keys) == ["Class", "Icon", "Modalias"], "only what has no typed field")
        #expect(
            device.flag(.connected) == true && device.flag(.servicesResolved) == true && device.flag(.paired) == false)
        #expect(MemoryLayout<DeviceObject>.stride <= 112)

        let unnamed = Self.bluetoothd.filter { $0.key != "Name" }.merging(["Alias": .string("C0-FF-EE-00-00-01")]) {
            $1
        }
        let derived = DeviceObject(at: Self.path, unnamed)
        #expect(derived.properties(at: Self.path) == BlueZProperties(unnamed))
        #expect(derived.others["Alias"] == nil, "an alias that is the address with dashes is derived")
    }

    /// Each value a typed field cannot give back exactly is kept as received.
    @Test(arguments: [
        ("Address", DBusValue.string("c0:ff:ee:00:00:01")), ("Address", .string("C0:FF:EE:00:00")),
        ("Address", .string("C0-FF-EE-00-00-01")),
        ("AddressType", .string("le-random")), ("Alias", .string("my sensor")),
        ("Adapter", .objectPath("/org/bluez/hci1")),
        ("Adapter", .string("/org/bluez/hci0")), ("UUIDs", .array(element: "s", [.string(custom.uppercased())])),
        ("UUIDs", .array(element: "s", [.string("180f")])), ("UUIDs", .array(element: "o", [])),
        ("AdvertisingFlags", .bytes([6, 1])),
        ("AdvertisingFlags", .bytes([])), ("Connected", .string("yes")), ("RSSI", .int32(-61)),
        ("Appearance", .int16(1)),
        ("Name", .int32(3)), ("Sets", .array(element: "o", [])),
        (
            "ManufacturerData",
            .dictionary(key: "q", value: "v", [DBusDictionaryEntry(key: .uint16(1), value: .variant(.string("x")))])
        ),
        (
            "ManufacturerData",
            .dictionary(key: "q", value: "v", [DBusDictionaryEntry(key: .uint16(1), value: .bytes([1]))])
        ),
        ("ManufacturerData", .dictionary(key: "s", value: "v", [])), ("ManufacturerData", .bytes([1])),
        (
            "ServiceData",
            .dictionary(key: "s", value: "v", [DBusDictionaryEntry(key: .string("180f"), value: .variant(.bytes([1])))])
        ),
        (
            "ServiceData",
            .dictionary(
                key: "s", value: "v",
                [DBusDictionaryEntry(key: .string(custom.uppercased()), value: .variant(.bytes([1])))])
        ),
        (
            "ServiceData",
            .dictionary(
                key: "s", value: "v",
                [DBusDictionaryEntry(key: .string(custom), value: .variant(.bytes(Array(repeating: 7, count: 70_000))))]
            )
        ),
    ])
    func aValueNoFieldGivesBackExactlyIsKeptAsReceived(name: String, value: DBusValue) {
        var properties = Self.bluetoothd
        properties[name] = value
        let device = DeviceObject(at: Self.path, properties)
        #expect(device.others[name] == value, "\(name)")
        #expect(device.properties(at: Self.path) == BlueZProperties(properties), "\(name)")
    }

    /// Changes, invalidations and values that move between a typed field and `others`, applied both to the compact
    /// form and to `BlueZProperties`: after every step both read the same. The alias that is derived from the
    /// name or the address keeps its value when they change.
    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func everySequenceOfChangesReadsBackWhatTheGenericFormHolds(seed: UInt64) {
        let candidates: [(String, [DBusValue?])] = [
            ("Name", [.string("greenhouse-3"), .string("other"), nil, .int32(1)]),
            (
                "Alias",
                [
                    .string("greenhouse-3"), .string("C0-FF-EE-00-00-01"), .string("C0-FF-EE-00-00-02"),
                    .string("custom"), nil,
                ]
            ),
            ("Address", [.string("C0:FF:EE:00:00:01"), .string("C0:FF:EE:00:00:02"), .string("odd"), nil]),
            ("Connected", [.boolean(true), .boolean(false), .variant(.boolean(true)), nil, .string("no")]),
            ("ServicesResolved", [.boolean(true), .boolean(false), nil]),
            ("RSSI", [.int16(-40), .int16(-90), nil, .int32(5)]),
            ("UUIDs", [.array(element: "s", [.string(Self.battery)]), .array(element: "s", [.string("180F")]), nil]),
            ("Adapter", [.objectPath("/org/bluez/hci0"), .objectPath("/org/bluez/hci9"), nil]),
            ("AdvertisingFlags", [.bytes([6]), .bytes([6, 0]), nil]),
            (
                "ManufacturerData",
                [
                    .dictionary(key: "q", value: "v", []), nil, .string("x"),
                    .dictionary(
                        key: "q", value: "v",
                        [
                            DBusDictionaryEntry(key: .uint16(0xFFFF), value: .variant(.bytes([1, 2, 3]))),
                            DBusDictionaryEntry(key: .uint16(0x0001), value: .variant(.bytes([]))),
                        ]),
                ]
            ),
            (
                "ServiceData",
                [
                    nil,
                    .dictionary(
                        key: "s", value: "v",
                        [DBusDictionaryEntry(key: .string(Self.battery), value: .variant(.bytes([9])))]),
                    .dictionary(
                        key: "s", value: "v", [DBusDictionaryEntry(key: .string("x"), value: .variant(.bytes([9])))]),
                ]
            ),
        ]
        var random = SplitMix64(seed: seed)
        var device = DeviceObject(at: Self.path, Self.bluetoothd)
        var generic = BlueZProperties(Self.bluetoothd)
        for step in 0..<300 {
            let (name, values) = candidates[Int(random.next() % UInt64(candidates.count))]
            let value = values[Int(random.next() % UInt64(values.count))]
            device.set(name, to: value, at: Self.path)
            generic.set(name, to: value)
            #expect(
                device.properties(at: Self.path) == generic,
                "seed \(seed), step \(step): \(name) = \(String(describing: value))")
            if device.properties(at: Self.path) != generic { return }
            #expect(device.flag(.connected) == generic["Connected"]?.boolean)
        }
    }

    @Test func addressesAreReadOnlyInBluetoothdsForm() {
        #expect(DeviceObject.parseAddress("C0:FF:EE:00:0A:01") == 0xC0FF_EE00_0A01)
        #expect(DeviceObject.format(0xC0FF_EE00_0A01, separator: UInt8(ascii: ":")) == "C0:FF:EE:00:0A:01")
        #expect(DeviceObject.format(0xC0FF_EE00_0A01, separator: UInt8(ascii: "-")) == "C0-FF-EE-00-0A-01")
        for bad in [
            "c0:ff:ee:00:0a:01", "C0:FF:EE:00:0A:0", "C0:FF:EE:00:0A:011", "C0FFEE000A01xxxxx", "G0:FF:EE:00:0A:01", "",
        ] {
            #expect(DeviceObject.parseAddress(bad) == nil, "\(bad)")
        }
    }

    /// Through the cache's signals: the transport's checks read the compact device, a removal forgets it.
    @Test func theCacheKeepsDevicesCompactlyFromSignalToRemoval() {
        var state = BlueZObjectCache.State()
        state.ready = true
        ObjectCacheTreeTests.apply(
            ObjectCacheTreeTests.added(Self.path, BlueZ.deviceInterface, Self.bluetoothd), to: &state)
        #expect(state.properties(Self.path, BlueZ.deviceInterface) == BlueZProperties(Self.bluetoothd))
        #expect(BlueZObjectCache.TreeView(state: state).device(Self.path)?.flag(.connected) == true)
        #expect(BlueZObjectCache.invalidation(of: Self.path, requireConnected: true, in: state) == nil)
        ObjectCacheTreeTests.apply(
            ObjectCacheTreeTests.changed(
                Self.path, BlueZ.deviceInterface, ["Connected": .boolean(false)], invalidated: ["RSSI"]), to: &state)
        #expect(state.properties(Self.path, BlueZ.deviceInterface)?["RSSI"] == nil)
        #expect(BlueZObjectCache.invalidation(of: Self.path, requireConnected: true, in: state)?.code == .notConnected)
        ObjectCacheTreeTests.apply(ObjectCacheTreeTests.removed(Self.path, [BlueZ.deviceInterface]), to: &state)
        #expect(!state.hasObject(Self.path) && state.devices.isEmpty)
        #expect(
            BlueZObjectCache.invalidation(of: Self.path, requireConnected: false, in: state)?.code == .deviceVanished)
        ObjectCacheTreeTests.apply(
            ObjectCacheTreeTests.changed(Self.path, BlueZ.deviceInterface, ["Connected": .boolean(true)]), to: &state)
        #expect(state.devices.isEmpty, "a change racing the removal brings nothing back")
    }
}
