import Basics
import DBus
import KeepAlive
import Polling

/// One GATT object bluetoothd exports below a device (a service, a characteristic or a descriptor), kept in
/// 40 bytes by the object cache.
///
/// Connected once to each of 10,000 devices, bluetoothd exports about 12 GATT objects per device; kept as every
/// property of every interface (a dictionary per object and one per interface, a heap string per UUID and parent
/// path, an array per flag list) they were 100 MiB of a 180-MiB heap (Benchmarks/NOTES.md). What the transport
/// reads of them is where they are, their UUID, flags and whether a characteristic notifies: the path is
/// bluetoothd's `…/dev_…/serviceXXXX/charYYYY/descZZZZ`, so three handles give it back.
///
/// Kept exactly, or not at all: an object whose path is not in that form, whose parent property is not its path's
/// parent, or which has a property not listed here, stays whole in the cache's generic tree. Not kept, as the
/// transport never reads them from the tree: `Value` (reads are `ReadValue`, notifications come from the signal
/// itself), `Handle` (in the path), `MTU` (of the link, not of the object) and `Includes`.
struct GattObject: Sendable, Equatable {
    enum Kind: UInt8, Sendable {
        case service, characteristic, descriptor

        var interface: String {
            switch self {
            case .service: BlueZ.gattServiceInterface
            case .characteristic: BlueZ.gattCharacteristicInterface
            case .descriptor: BlueZ.gattDescriptorInterface
            }
        }

        init?(interface: String) {
            switch interface {
            case BlueZ.gattServiceInterface: self = .service
            case BlueZ.gattCharacteristicInterface: self = .characteristic
            case BlueZ.gattDescriptorInterface: self = .descriptor
            default: return nil
            }
        }

        /// The property naming the parent object: the device, the service, the characteristic.
        var parentProperty: String {
            switch self {
            case .service: "Device"
            case .characteristic: "Service"
            case .descriptor: "Characteristic"
            }
        }
    }

    /// Where the object is below its device: the handles in its path (0 where the path has no such part;
    /// ATT never gives handle 0 to an attribute).
    struct Key: Sendable, Hashable, Comparable {
        var service: UInt16
        var characteristic: UInt16 = 0
        var descriptor: UInt16 = 0

        var kind: Kind { descriptor != 0 ? .descriptor : characteristic != 0 ? .characteristic : .service }

        static func < (lhs: Key, rhs: Key) -> Bool {
            (lhs.service, lhs.characteristic, lhs.descriptor) < (rhs.service, rhs.characteristic, rhs.descriptor)
        }

        /// `…/dev_…/service000c/char000d/desc000f` → the device's path and (0x0c, 0x0d, 0x0f); nil for any other
        /// form (including upper-case digits, which bluetoothd never writes: the path is rebuilt from the key).
        static func locate(_ path: ObjectPath) -> (device: ObjectPath, key: Key)? {
            guard let device = BlueZ.deviceOwning(path) else { return nil }
            let utf8 = path.rawValue.utf8
            var index = utf8.index(utf8.startIndex, offsetBy: device.rawValue.utf8.count)
            func part(_ name: String) -> UInt16? {
                guard utf8[index...].starts(with: name.utf8) else { return nil }
                var cursor = utf8.index(index, offsetBy: name.utf8.count)
                var value: UInt16 = 0
                for _ in 0..<4 {
                    guard cursor != utf8.endIndex, let digit = Hex.lowercaseValue(of: utf8[cursor]) else { return nil }
                    value = value << 4 | UInt16(digit)
                    cursor = utf8.index(after: cursor)
                }
                index = cursor
                return value == 0 ? nil : value
            }
            guard let service = part("/service") else { return nil }
            var key = Key(service: service)
            if index != utf8.endIndex {
                guard let characteristic = part("/char") else { return nil }
                key.characteristic = characteristic
                if index != utf8.endIndex {
                    guard let descriptor = part("/desc"), index == utf8.endIndex else { return nil }
                    key.descriptor = descriptor
                }
            }
            return (device, key)
        }

        /// The object's path below `device`, as bluetoothd writes it.
        func path(below device: ObjectPath) -> ObjectPath {
            var text = Array(device.rawValue.utf8)
            text.reserveCapacity(text.count + 26)
            func append(_ name: String, _ handle: UInt16) {
                text.append(contentsOf: name.utf8)
                for shift in stride(from: 12, through: 0, by: -4) {
                    let nibble = UInt8(truncatingIfNeeded: handle >> UInt16(shift)) & 0xF
                    text.append(nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10)
                }
            }
            append("/service", service)
            if characteristic != 0 { append("/char", characteristic) }
            if descriptor != 0 { append("/desc", descriptor) }
            // Valid by construction (a valid path, then `/name` and hex digits); checked all the same, as a literal is.
            return ObjectPath(stringLiteral: String(decoding: text, as: UTF8.self))
        }

        /// The parent's key (a service's parent is the device: nil).
        var parent: Key? {
            switch kind {
            case .service: nil
            case .characteristic: Key(service: service)
            case .descriptor: Key(service: service, characteristic: characteristic)
            }
        }
    }

    var key: Key
    var uuid: BluetoothUUID
    var flags: GattFlags?
    var primary: Bool?
    var notifying: Bool?
    var notifyAcquired: Bool?
    var writeAcquired: Bool?

    var kind: Kind { key.kind }

    /// The object at `key` below `device` with `properties` (as received: variants are unwrapped here), or nil
    /// when this form cannot keep them exactly.
    init?(key: Key, device: ObjectPath, interface: String, properties: [String: DBusValue]) {
        guard Kind(interface: interface) == key.kind,
            // BlueZ writes UUIDs in lower case: one in another form would not read back the same.
            let uuid = properties["UUID"]?.unwrappingVariants.string.flatMap(BlueZ.uuid(inBlueZForm:))
        else { return nil }
        self.key = key
        self.uuid = uuid
        var sawParent = false
        for (name, value) in properties where name != "UUID" {
            if name == key.kind.parentProperty {
                guard Self.isParent(value.unwrappingVariants, key: key, device: device) else { return nil }
                sawParent = true
            } else if !set(name, to: value.unwrappingVariants) {
                return nil
            }
        }
        guard sawParent else { return nil }
    }

    private static func isParent(_ value: DBusValue, key: Key, device: ObjectPath) -> Bool {
        guard let path = value.objectPath else { return false }
        return path == (key.parent?.path(below: device) ?? device)
    }

    /// Applies one property change (`nil`: invalidated); false when this form cannot keep the result exactly (the
    /// object must then be kept whole instead), and the object may be half changed.
    mutating func set(_ name: String, to value: DBusValue?) -> Bool {
        switch (name, key.kind) {
        case ("Value", _), ("Handle", _), ("MTU", .characteristic), ("Includes", .service):
            return true  // not kept (see the type's documentation)
        case ("Flags", .characteristic), ("Flags", .descriptor):
            guard let value else {
                flags = nil
                return true
            }
            guard let parsed = GattFlags(value) else { return false }
            flags = parsed
        case ("Primary", .service): return Self.set(&primary, value)
        case ("Notifying", .characteristic): return Self.set(&notifying, value)
        case ("NotifyAcquired", .characteristic): return Self.set(&notifyAcquired, value)
        case ("WriteAcquired", .characteristic): return Self.set(&writeAcquired, value)
        default:
            return false  // UUID and the parent are fixed; anything else is not known here
        }
        return true
    }

    private static func set(_ field: inout Bool?, _ value: DBusValue?) -> Bool {
        guard let value else {
            field = nil
            return true
        }
        guard let boolean = value.boolean else { return false }
        field = boolean
        return true
    }

    /// The properties as the generic tree keeps them (what `BlueZObjectCache.properties(_:_:)` returns).
    func properties(below device: ObjectPath) -> BlueZProperties {
        var values: [String: DBusValue] = ["UUID": .string(uuid.description)]
        values[kind.parentProperty] = .objectPath(key.parent?.path(below: device) ?? device)
        if let flags { values["Flags"] = flags.value }
        if let primary { values["Primary"] = .boolean(primary) }
        if let notifying { values["Notifying"] = .boolean(notifying) }
        if let notifyAcquired { values["NotifyAcquired"] = .boolean(notifyAcquired) }
        if let writeAcquired { values["WriteAcquired"] = .boolean(writeAcquired) }
        return BlueZProperties(values)
    }
}

/// A GATT characteristic's or descriptor's `Flags` as a bit set (BlueZ's GattCharacteristic1 and GattDescriptor1
/// documentation lists the names). Only a list this can give back exactly is kept so: every name known, each once,
/// in the order below (the order bluetoothd writes them in).
struct GattFlags: Sendable, Equatable {
    static let names = [
        "broadcast", "read", "write-without-response", "write", "notify", "indicate", "authenticated-signed-writes",
        "extended-properties", "reliable-write", "writable-auxiliaries", "encrypt-read", "encrypt-write",
        "encrypt-notify", "encrypt-indicate", "encrypt-authenticated-read", "encrypt-authenticated-write",
        "encrypt-authenticated-notify", "encrypt-authenticated-indicate", "secure-read", "secure-write",
        "secure-notify", "secure-indicate", "authorize",
    ]

    var bits: UInt32

    init?(_ value: DBusValue) {
        guard case .array(let element, let items) = value, element.rawValue == "s" else { return nil }
        var bits: UInt32 = 0
        var last = -1
        for item in items {
            guard let name = item.string, let index = Self.names.firstIndex(of: name), index > last else { return nil }
            bits |= 1 << UInt32(index)
            last = index
        }
        self.bits = bits
    }

    var value: DBusValue {
        .array(
            element: "s", Self.names.indices.filter { bits & (1 << UInt32($0)) != 0 }.map { .string(Self.names[$0]) })
    }
}
