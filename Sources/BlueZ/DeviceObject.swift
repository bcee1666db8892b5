import DBus
import KeepAlive
import Polling

/// One device's `org.bluez.Device1` as the object cache keeps it: the properties bluetoothd sends on every device
/// in typed fields, anything else as received.
///
/// At 10,000 devices the devices' property dictionaries were 13.5 MiB of dictionary storage and about 9 MiB of
/// the values in it (a heap string per address, alias and UUID, an array per UUID list and advertising-flags
/// byte, two arrays and a box per advertising-data entry): about 2.3 KB per device (Benchmarks/NOTES.md). In
/// this form a device is 88 bytes, and one array each for its UUIDs and its two kinds of advertising data.
///
/// Every property fits, so a device is never kept another way: a property is in a typed field only when that
/// field gives it back exactly (an address in BlueZ's upper-case form, UUIDs in lower case, an alias that is the
/// name or the address with dashes, an adapter that is the path's, advertising data whose values are all byte
/// arrays); otherwise, or when the name is not one of these, it is in `others` as received (with its variant
/// wrappers taken off, as `BlueZProperties` keeps it). `properties(at:)` gives back what `BlueZProperties` would
/// hold for the same signals.
struct DeviceObject: Sendable, Equatable {
    /// The boolean properties, one bit each in `present` and `truth`.
    enum Flag: Int, CaseIterable, Sendable {
        case paired, bonded, trusted, blocked, legacyPairing, connected, servicesResolved, wakeAllowed

        var name: String {
            switch self {
            case .paired: "Paired"
            case .bonded: "Bonded"
            case .trusted: "Trusted"
            case .blocked: "Blocked"
            case .legacyPairing: "LegacyPairing"
            case .connected: "Connected"
            case .servicesResolved: "ServicesResolved"
            case .wakeAllowed: "WakeAllowed"
            }
        }

        init?(name: String) {
            switch name {
            case "Paired": self = .paired
            case "Bonded": self = .bonded
            case "Trusted": self = .trusted
            case "Blocked": self = .blocked
            case "LegacyPairing": self = .legacyPairing
            case "Connected": self = .connected
            case "ServicesResolved": self = .servicesResolved
            case "WakeAllowed": self = .wakeAllowed
            default: return nil
            }
        }
    }

    /// How `Alias` is kept when it is not in `others`.
    enum Alias: UInt8, Sendable {
        case absent
        /// The same string as `Name` (what bluetoothd sends when the user set none and the device has a name).
        case name
        /// The address with `-` for `:` (bluetoothd's alias for a device without a name).
        case dashedAddress
    }

    private var present: UInt8 = 0
    private var truth: UInt8 = 0
    /// `Address` as 48 bits (written `AA:BB:CC:DD:EE:FF`).
    private var address: UInt64?
    /// `AddressType`: true for `random`, false for `public`.
    private var randomAddress: Bool?
    private var alias = Alias.absent
    /// `Adapter` is the path's parent (the adapter the path names).
    private var adapterIsParent = false
    private var appearance: UInt16?
    private var rssi: Int16?
    private var txPower: Int16?
    /// `AdvertisingFlags` when it is one byte (BlueZ's one flags byte).
    private var advertisingFlags: UInt8?
    private var name: String?
    private var uuids: [BluetoothUUID]?
    /// `ManufacturerData` (`a{qv}`, each value an `ay`) packed: per entry the company, the length, the bytes.
    private var manufacturerData: [UInt8]?
    /// `ServiceData` (`a{sv}`, each key a UUID in lower case, each value an `ay`) packed: per entry the UUID's 16
    /// bytes, the length, the bytes.
    private var serviceData: [UInt8]?
    /// The properties no typed field holds, as received.
    private(set) var others: [String: DBusValue] = [:]

    /// The device at `path` with `properties` as received (variants are unwrapped here).
    init(at path: ObjectPath, _ properties: [String: DBusValue]) {
        // The alias last: whether it is the name or the dashed address depends on those.
        for (name, value) in properties where name != "Alias" { set(name, to: value, at: path) }
        if let alias = properties["Alias"] { set("Alias", to: alias, at: path) }
    }

    /// `Connected`, `ServicesResolved`, … (`nil` when the device does not have it).
    func flag(_ flag: Flag) -> Bool? {
        let bit: UInt8 = 1 << UInt8(flag.rawValue)
        return present & bit == 0 ? nil : truth & bit != 0
    }

    /// Applies one property change (`nil`: invalidated).
    mutating func set(_ name: String, to value: DBusValue?, at path: ObjectPath) {
        // A property the alias is derived from keeps the alias it had: it moves to `others` first.
        if (name == "Name" && alias == .name) || (name == "Address" && alias == .dashedAddress) {
            others["Alias"] = aliasValue
            alias = .absent
        }
        let value = value?.unwrappingVariants
        if name == "Alias" { alias = .absent }
        let kept = value.map { keep(name, $0, at: path) } ?? clear(name)
        if !kept {
            others[name] = value
        } else if !others.isEmpty {  // nearly always empty: bluetoothd's properties all have typed fields
            others[name] = nil
        }
    }

    /// Puts `value` in the typed field for `name`; false when there is none that gives it back exactly.
    private mutating func keep(_ name: String, _ value: DBusValue, at path: ObjectPath) -> Bool {
        if let flag = Flag(name: name) {
            guard let boolean = value.boolean else {
                clear(name)
                return false
            }
            let bit: UInt8 = 1 << UInt8(flag.rawValue)
            present |= bit
            truth = boolean ? truth | bit : truth & ~bit
            return true
        }
        switch name {
        case "Address":
            address = value.string.flatMap(Self.parseAddress)
            return address != nil
        case "AddressType":
            randomAddress = value.string == "random" ? true : value.string == "public" ? false : nil
            return randomAddress != nil
        case "Alias":
            guard let text = value.string else { return false }
            if let name = self.name, text == name {
                alias = .name
            } else if let address, text == Self.format(address, separator: UInt8(ascii: "-")) {
                alias = .dashedAddress
            }
            return alias != .absent
        case "Adapter":
            adapterIsParent = value.objectPath != nil && value.objectPath == path.parent
            return adapterIsParent
        case "Appearance":
            appearance = value.uint16
            return appearance != nil
        case "RSSI":
            rssi = value.int16
            return rssi != nil
        case "TxPower":
            txPower = value.int16
            return txPower != nil
        case "AdvertisingFlags":
            advertisingFlags = value.bytes.flatMap { $0.count == 1 ? $0[0] : nil }
            return advertisingFlags != nil
        case "Name":
            self.name = value.string
            return self.name != nil
        case "UUIDs":
            uuids = Self.parseUUIDs(value)
            return uuids != nil
        case "ManufacturerData":
            manufacturerData = Self.pack(value, keys: .company)
            return manufacturerData != nil
        case "ServiceData":
            serviceData = Self.pack(value, keys: .uuid)
            return serviceData != nil
        default:
            return false
        }
    }

    /// Empties the typed field for `name` (the value is gone, or is now kept in `others`). Always true.
    @discardableResult
    private mutating func clear(_ name: String) -> Bool {
        if let flag = Flag(name: name) {
            present &= ~(1 << UInt8(flag.rawValue))
            return true
        }
        switch name {
        case "Address": address = nil
        case "AddressType": randomAddress = nil
        case "Alias": alias = .absent
        case "Adapter": adapterIsParent = false
        case "Appearance": appearance = nil
        case "RSSI": rssi = nil
        case "TxPower": txPower = nil
        case "AdvertisingFlags": advertisingFlags = nil
        case "Name": self.name = nil
        case "UUIDs": uuids = nil
        case "ManufacturerData": manufacturerData = nil
        case "ServiceData": serviceData = nil
        default: break
        }
        return true
    }

    private var aliasValue: DBusValue? {
        switch alias {
        case .absent: nil
        case .name: name.map { .string($0) }
        case .dashedAddress: address.map { .string(Self.format($0, separator: UInt8(ascii: "-"))) }
        }
    }

    /// The properties as the generic tree keeps them (what `BlueZObjectCache.properties(_:_:)` returns).
    func properties(at path: ObjectPath) -> BlueZProperties {
        var values = others
        for flag in Flag.allCases {
            if let value = self.flag(flag) { values[flag.name] = .boolean(value) }
        }
        if let address { values["Address"] = .string(Self.format(address, separator: UInt8(ascii: ":"))) }
        if let randomAddress { values["AddressType"] = .string(randomAddress ? "random" : "public") }
        if let aliasValue { values["Alias"] = aliasValue }
        if adapterIsParent, let adapter = path.parent { values["Adapter"] = .objectPath(adapter) }
        if let appearance { values["Appearance"] = .uint16(appearance) }
        if let rssi { values["RSSI"] = .int16(rssi) }
        if let txPower { values["TxPower"] = .int16(txPower) }
        if let advertisingFlags { values["AdvertisingFlags"] = .bytes([advertisingFlags]) }
        if let name { values["Name"] = .string(name) }
        if let uuids { values["UUIDs"] = .array(element: "s", uuids.map { .string($0.description) }) }
        if let manufacturerData { values["ManufacturerData"] = Self.unpack(manufacturerData, keys: .company) }
        if let serviceData { values["ServiceData"] = Self.unpack(serviceData, keys: .uuid) }
        return BlueZProperties(values)
    }

    // MARK: Forms

    /// `AA:BB:CC:DD:EE:FF` (upper-case hex, as bluetoothd writes it) → 48 bits; nil for any other form.
    static func parseAddress(_ text: String) -> UInt64? {
        let utf8 = text.utf8
        guard utf8.count == 17 else { return nil }
        var value: UInt64 = 0
        for (offset, byte) in utf8.enumerated() {
            if offset % 3 == 2 {
                guard byte == UInt8(ascii: ":") else { return nil }
                continue
            }
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = value << 4 | UInt64(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = value << 4 | UInt64(byte - UInt8(ascii: "A") + 10)
            default: return nil
            }
        }
        return value
    }

    /// 48 bits → `AA:BB:CC:DD:EE:FF`, or with `separator` between the octets.
    static func format(_ address: UInt64, separator: UInt8) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(17)
        for nibble in 0..<12 {
            if nibble > 0, nibble % 2 == 0 { text.append(separator) }
            let digit = UInt8(truncatingIfNeeded: address >> UInt64(44 - 4 * nibble)) & 0xF
            text.append(digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "A") + digit - 10)
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The keys of a packed advertising-data dictionary.
    private enum PackedKey {
        /// `q`: a company identifier, 2 bytes.
        case company
        /// `s`: a UUID in BlueZ's lower-case form, 16 bytes.
        case uuid
    }

    /// `a{qv}` or `a{sv}` whose every value is a variant holding an `ay`, packed into one array (two arrays and
    /// a box per entry as received); nil for anything else, or a value of 64 KiB or more.
    private static func pack(_ value: DBusValue, keys: PackedKey) -> [UInt8]? {
        guard case .dictionary(let key, let valueSignature, let entries) = value, valueSignature.rawValue == "v",
            key.rawValue == (keys == .company ? "q" : "s")
        else { return nil }
        var packed: [UInt8] = []
        for entry in entries {
            guard case .variant(.bytes(let bytes)) = entry.value, bytes.count <= Int(UInt16.max) else { return nil }
            switch keys {
            case .company:
                guard let company = entry.key.uint16 else { return nil }
                packed += [UInt8(truncatingIfNeeded: company >> 8), UInt8(truncatingIfNeeded: company)]
            case .uuid:
                guard let uuid = entry.key.string.flatMap(BlueZ.uuid(inBlueZForm:)) else { return nil }
                packed += uuid.bytes
            }
            packed += [UInt8(truncatingIfNeeded: bytes.count >> 8), UInt8(truncatingIfNeeded: bytes.count)]
            packed += bytes
        }
        return packed
    }

    private static func unpack(_ packed: [UInt8], keys: PackedKey) -> DBusValue {
        var entries: [DBusDictionaryEntry] = []
        var index = 0
        while index < packed.count {
            let key: DBusValue
            switch keys {
            case .company:
                key = .uint16(UInt16(packed[index]) << 8 | UInt16(packed[index + 1]))
                index += 2
            case .uuid:
                key = .string(BluetoothUUID(packing: Array(packed[index..<index + 16])).description)
                index += 16
            }
            let count = Int(packed[index]) << 8 | Int(packed[index + 1])
            index += 2
            entries.append(DBusDictionaryEntry(key: key, value: .variant(.bytes(Array(packed[index..<index + count])))))
            index += count
        }
        return .dictionary(key: keys == .company ? "q" : "s", value: "v", entries)
    }

    /// An `as` of UUIDs each in BlueZ's lower-case form; nil for anything else.
    private static func parseUUIDs(_ value: DBusValue) -> [BluetoothUUID]? {
        guard case .array(let element, let items) = value, element.rawValue == "s" else { return nil }
        var uuids: [BluetoothUUID] = []
        uuids.reserveCapacity(items.count)
        for item in items {
            guard let uuid = item.string.flatMap(BlueZ.uuid(inBlueZForm:)) else { return nil }
            uuids.append(uuid)
        }
        return uuids
    }
}
