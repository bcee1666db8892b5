/// A GATT descriptor of a characteristic, besides the CCCD (0x2902) that the simulator manages itself.
///
/// Exported as `org.bluez.GattDescriptor1` at `…/charXXXX/descYYYY`, its handle following the characteristic's
/// value handle (and the CCCD's, if any) in the order given.
///
/// ```swift
/// SimulatedCharacteristic(
///     uuid: "4b410102-6b65-6570-616c-697665000000", flags: ["read"], value: .temperature(celsius: -18.25),
///     descriptors: [.presentationFormat(format: .sint16, exponent: -2, unit: 0x272F)])
/// ```
public struct SimulatedDescriptor: Sendable {
    /// 16-bit (`"2904"`) or 128-bit UUID; stored as BlueZ writes it, 128-bit lower case.
    public var uuid: String
    /// The bytes a read answers (and a write replaces, when `flags` allows writing).
    public var value: [UInt8]
    /// `read`, `write`… (GattDescriptor1.Flags).
    public var flags: [String]

    public init(uuid: String, value: [UInt8], flags: [String] = ["read"]) {
        self.uuid = SimulatedUUID.full(uuid)
        self.value = value
        self.flags = flags
    }
}

extension SimulatedDescriptor {
    /// Formats of the Characteristic Presentation Format descriptor (Bluetooth Assigned Numbers, "Formats").
    public enum Format: UInt8, Sendable {
        case boolean = 0x01
        case uint8 = 0x04
        case uint16 = 0x06
        case uint32 = 0x08
        case sint8 = 0x0C
        case sint16 = 0x0E
        case sint32 = 0x10
        case float32 = 0x14
        case utf8 = 0x19
    }

    /// Characteristic Presentation Format 0x2904: 7 bytes — format, exponent (sint8; value × 10^exponent),
    /// unit (uint16 LE, an org.bluetooth.unit assigned number, e.g. 0x272F degree Celsius), namespace (0x01:
    /// Bluetooth SIG), description (uint16 LE; 0x0000 "unknown").
    public static func presentationFormat(
        format: Format, exponent: Int8 = 0, unit: UInt16, namespace: UInt8 = 0x01, description: UInt16 = 0x0000
    ) -> SimulatedDescriptor {
        SimulatedDescriptor(uuid: "2904", value: [
            format.rawValue, UInt8(bitPattern: exponent), UInt8(unit & 0xff), UInt8(unit >> 8), namespace,
            UInt8(description & 0xff), UInt8(description >> 8),
        ])
    }

    /// Characteristic User Description 0x2901: a UTF-8 name for people.
    public static func userDescription(_ text: String) -> SimulatedDescriptor {
        SimulatedDescriptor(uuid: "2901", value: Array(text.utf8))
    }
}
