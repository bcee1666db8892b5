public import DBus
import KeepAlive
public import Polling

/// Names of the BlueZ D-Bus API this client uses, and where BlueZ puts its objects.
public enum BlueZ {
    public static let service = "org.bluez"
    public static let adapterInterface = "org.bluez.Adapter1"
    public static let deviceInterface = "org.bluez.Device1"
    /// The `Device1` properties whose change means an advertisement was heard.
    static let heardProperties: Set<String> = ["RSSI", "ServiceData", "ManufacturerData"]
    public static let gattServiceInterface = "org.bluez.GattService1"
    public static let gattCharacteristicInterface = "org.bluez.GattCharacteristic1"
    public static let gattDescriptorInterface = "org.bluez.GattDescriptor1"
    public static let batteryInterface = "org.bluez.Battery1"
    static let propertiesInterface = "org.freedesktop.DBus.Properties"
    static let objectManagerInterface = "org.freedesktop.DBus.ObjectManager"

    /// The name the object cache files `interface` under: one of the constants above when it is one (a name
    /// decoded from a message is a heap string of its own on every object, a constant is stored once, in the
    /// binary), `nil` for the D-Bus standard interfaces BlueZ lists on every object, which carry no properties.
    static func cachedInterface(_ interface: String) -> String? {
        switch interface {
        case deviceInterface: deviceInterface
        case gattCharacteristicInterface: gattCharacteristicInterface
        case gattServiceInterface: gattServiceInterface
        case gattDescriptorInterface: gattDescriptorInterface
        case adapterInterface: adapterInterface
        case batteryInterface: batteryInterface
        default: interface.hasPrefix("org.freedesktop.DBus.") ? nil : interface
        }
    }

    /// The UUID `text` names when it is in BlueZ's form (128 bits, lower case, 8-4-4-4-12): the form the cache
    /// keeps UUIDs in compactly, as only it reads back as the same string.
    static func uuid(inBlueZForm text: String) -> BluetoothUUID? {
        BluetoothUUID(exactDescription: text)
    }

    /// `/org/bluez/hci0`.
    public static func adapterPath(_ adapter: String) throws -> ObjectPath {
        if let path = path(adapter: adapter, device: nil) { return path }
        return try ObjectPath("/org/bluez/" + adapter)  // not a path element: libdbus's check says why
    }

    /// `/org/bluez/<adapter>`, with `/dev_<device>` when given, built in one allocation; nil when `adapter` is not
    /// a path element (`[A-Za-z0-9_]+`). `device` is 17 bytes already checked. Every poll builds these three or
    /// four times, and concatenating and validating with libdbus cost several times more.
    private static func path(adapter: String, device: UnsafeBufferPointer<UInt8>?) -> ObjectPath? {
        let prefix: StaticString = "/org/bluez/"
        let count = prefix.utf8CodeUnitCount + adapter.utf8.count + (device.map { 5 + $0.count } ?? 0)
        var adapter = adapter
        let raw: String? = adapter.withUTF8 { name in
            guard !name.isEmpty, name.allSatisfy(isPathElementByte) else { return nil }
            return String(unsafeUninitializedCapacity: count) { buffer in
                var index = 0
                func append(_ bytes: UnsafeBufferPointer<UInt8>) {
                    for byte in bytes {
                        buffer[index] = byte
                        index += 1
                    }
                }
                append(UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount))
                append(name)
                if let device {
                    let element: StaticString = "/dev_"
                    append(UnsafeBufferPointer(start: element.utf8Start, count: element.utf8CodeUnitCount))
                    append(device)
                }
                return index
            }
        }
        return raw.map { ObjectPath(unchecked: $0) }
    }

    private static func isPathElementByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "_"):
            true
        default: false
        }
    }

    /// The device a GATT object belongs to: `/org/bluez/hci0/dev_…/service0010/char0011` → `/org/bluez/hci0/dev_…`.
    static func deviceOwning(_ path: ObjectPath) -> ObjectPath? {
        // On every signal's path (six or seven a poll): one pass over the bytes, where walking `String.UTF8View`
        // slices with `starts(with:)` and `firstIndex(of:)` cost several times more.
        var raw = path.rawValue
        let end: Int? = raw.withUTF8 { bytes in
            let prefix: StaticString = "/org/bluez/"
            guard bytes.count > prefix.utf8CodeUnitCount else { return nil }
            for offset in 0..<prefix.utf8CodeUnitCount where bytes[offset] != prefix.utf8Start[offset] { return nil }
            var index = prefix.utf8CodeUnitCount
            while index < bytes.count, bytes[index] != UInt8(ascii: "/") { index += 1 }  // the adapter
            guard bytes.count >= index + 5, bytes[index + 1] == UInt8(ascii: "d"),
                bytes[index + 2] == UInt8(ascii: "e"),
                bytes[index + 3] == UInt8(ascii: "v"), bytes[index + 4] == UInt8(ascii: "_")
            else { return nil }
            index += 5
            while index < bytes.count, bytes[index] != UInt8(ascii: "/") { index += 1 }
            return index
        }
        guard let end else { return nil }
        if end == raw.utf8.count { return path }
        // A valid path cut before a `/` is a valid path: not validated again.
        return ObjectPath(unchecked: String(decoding: raw.utf8.prefix(end), as: UTF8.self))
    }

    /// `/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF` — BlueZ's path for a device, derived from its address.
    ///
    /// Called four times per poll (connect, read, disconnect, link time): one pass over the address's UTF-8
    /// (splitting it and testing `Character`s for hex digits was one of the largest items of a poll's profile).
    public static func devicePath(_ peripheral: Peripheral) throws -> ObjectPath {
        var octets: [UInt8] = []
        octets.reserveCapacity(17)
        for (offset, byte) in peripheral.address.utf8.enumerated() {
            if offset % 3 == 2 {
                guard byte == UInt8(ascii: ":") else { try notAnAddress(peripheral) }
                octets.append(UInt8(ascii: "_"))
                continue
            }
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "F"): octets.append(byte)
            case UInt8(ascii: "a")...UInt8(ascii: "f"): octets.append(byte - UInt8(ascii: "a") + UInt8(ascii: "A"))
            default: try notAnAddress(peripheral)
            }
        }
        guard octets.count == 17 else { try notAnAddress(peripheral) }
        if let path = octets.withUnsafeBufferPointer({ path(adapter: peripheral.adapter, device: $0) }) { return path }
        // Not a path element: libdbus's check says why.
        return try ObjectPath("/org/bluez/" + peripheral.adapter + "/dev_" + String(decoding: octets, as: UTF8.self))
    }

    private static func notAnAddress(_ peripheral: Peripheral) throws -> Never {
        throw TransportError(
            .invalidArguments, "\"\(peripheral.address)\" is not a Bluetooth address (AA:BB:CC:DD:EE:FF)")
    }
}

/// The properties of one interface of one object, with typed getters that never trap: a property of the wrong
/// type reads as `nil`, exactly like a missing one.
public struct BlueZProperties: Sendable, Hashable {
    /// Each property's value with its `v` wrappers taken off (a variant is one more heap box per property).
    public private(set) var values: [String: DBusValue]

    public init(_ values: [String: DBusValue]) {
        var kept: [String: DBusValue] = [:]
        kept.reserveCapacity(values.count)
        for (name, value) in values { kept[Self.storedName(name)] = value.unwrappingVariants }
        self.values = kept
    }

    /// The names of 16 bytes or more BlueZ sends on every device, as constants (a shorter string is stored inline).
    private static func storedName(_ name: String) -> String {
        switch name {
        case "ServicesResolved": "ServicesResolved"
        case "ManufacturerData": "ManufacturerData"
        case "AdvertisingFlags": "AdvertisingFlags"
        default: name
        }
    }

    public subscript(_ name: String) -> DBusValue? {
        values[name]
    }

    /// Sets `name` to `value` (its variant wrappers taken off), or removes it (`nil`: invalidated).
    public mutating func set(_ name: String, to value: DBusValue?) {
        values[Self.storedName(name)] = value?.unwrappingVariants
    }

    func string(_ name: String) -> String? { self[name]?.string }
    func bool(_ name: String) -> Bool? { self[name]?.boolean }
    func path(_ name: String) -> ObjectPath? { self[name]?.objectPath }
    func strings(_ name: String) -> [String]? { self[name]?.array?.compactMap(\.string) }
    func uuid(_ name: String) -> BluetoothUUID? { string(name).flatMap { try? BluetoothUUID($0) } }
}

/// `org.bluez.Adapter1`.
public struct Adapter1: Sendable, Hashable {
    public var path: ObjectPath
    public var properties: BlueZProperties

    /// `hci0`.
    public var name: String { path.rawValue.split(separator: "/").last.map(String.init) ?? path.rawValue }
    public var address: String? { properties.string("Address") }
    public var powered: Bool { properties.bool("Powered") ?? false }
    /// `on`, `off`, `off-enabling`, `on-disabling`, `off-blocked` (rfkill).
    public var powerState: String? { properties.string("PowerState") }
    public var discovering: Bool { properties.bool("Discovering") ?? false }
    public var roles: [String] { properties.strings("Roles") ?? [] }
}

/// `org.bluez.Device1`.
public struct Device1: Sendable, Hashable {
    public var path: ObjectPath
    public var properties: BlueZProperties

    public var address: String? { properties.string("Address") }
    public var name: String? { properties.string("Name") }
    public var alias: String? { properties.string("Alias") }
    public var adapter: ObjectPath? { properties.path("Adapter") }
    public var connected: Bool { properties.bool("Connected") ?? false }
    public var servicesResolved: Bool { properties.bool("ServicesResolved") ?? false }
    public var rssi: Int16? { properties["RSSI"]?.int16 }
    public var txPower: Int16? { properties["TxPower"]?.int16 }
    public var uuids: [BluetoothUUID] { (properties.strings("UUIDs") ?? []).compactMap { try? BluetoothUUID($0) } }
    /// `a{qv}`: company identifier → payload.
    public var manufacturerData: [UInt16: [UInt8]] {
        var result: [UInt16: [UInt8]] = [:]
        for entry in properties["ManufacturerData"]?.dictionaryEntries ?? [] {
            if let company = entry.key.uint16, let bytes = entry.value.unwrappingVariants.bytes {
                result[company] = bytes
            }
        }
        return result
    }
    /// `a{sv}`: service UUID → payload.
    public var serviceData: [BluetoothUUID: [UInt8]] {
        var result: [BluetoothUUID: [UInt8]] = [:]
        for entry in properties["ServiceData"]?.dictionaryEntries ?? [] {
            if let text = entry.key.string, let uuid = try? BluetoothUUID(text),
                let bytes = entry.value.unwrappingVariants.bytes
            {
                result[uuid] = bytes
            }
        }
        return result
    }
}

/// `org.bluez.GattService1`.
public struct GattService1: Sendable, Hashable {
    public var path: ObjectPath
    public var properties: BlueZProperties

    public var uuid: BluetoothUUID? { properties.uuid("UUID") }
    public var device: ObjectPath? { properties.path("Device") }
    public var primary: Bool { properties.bool("Primary") ?? false }
}

/// `org.bluez.GattCharacteristic1`.
public struct GattCharacteristic1: Sendable, Hashable {
    public var path: ObjectPath
    public var properties: BlueZProperties

    public var uuid: BluetoothUUID? { properties.uuid("UUID") }
    public var service: ObjectPath? { properties.path("Service") }
    /// `read`, `write`, `write-without-response`, `notify`, `indicate`, …
    public var flags: [String] { properties.strings("Flags") ?? [] }
    public var value: [UInt8]? { properties["Value"]?.bytes }
    public var notifying: Bool { properties.bool("Notifying") ?? false }
}

/// `org.bluez.GattDescriptor1`.
public struct GattDescriptor1: Sendable, Hashable {
    public var path: ObjectPath
    public var properties: BlueZProperties

    public var uuid: BluetoothUUID? { properties.uuid("UUID") }
    public var characteristic: ObjectPath? { properties.path("Characteristic") }
}

/// `org.bluez.Battery1` (the battery plugin, on devices with the Battery Service).
public struct Battery1: Sendable, Hashable {
    public var path: ObjectPath
    public var properties: BlueZProperties

    public var percentage: UInt8? { properties["Percentage"]?.byte }
}
