import Basics

/// A 48-bit Bluetooth device address, as BlueZ writes it: `A4:C1:38:AA:BB:CC`, most significant byte first.
///
/// Held as one integer, so it costs no allocation and compares in one instruction. Advertisements carry addresses
/// in either byte order (BTHome, pvvx and MiBeacon least significant first, ATC1441 and Ruuvi most significant
/// first); the readers below take the order as a parameter, and the nonces use ``bytes`` (written order).
public struct BluetoothAddress: Sendable, Hashable, CustomStringConvertible {
    /// The 48 bits; `A4:C1:38:AA:BB:CC` is `0xA4C1_38AA_BBCC`.
    public let rawValue: UInt64

    /// The address whose 48 bits are `rawValue`; `nil` when a higher bit is set.
    public init?(rawValue: UInt64) {
        guard rawValue >> 48 == 0 else { return nil }
        self.rawValue = rawValue
    }

    /// Parses `A4:C1:38:AA:BB:CC` (either case of hexadecimal digit; `-` separators are accepted too).
    /// - Throws: ``AdvertisementError/Code/invalidAddress``.
    public init(parsing text: String) throws(AdvertisementError) {
        let characters = Array(text.utf8)
        var value: UInt64 = 0
        var valid = characters.count == 17
        if valid {
            for index in 0..<17 {
                let character = characters[index]
                if index % 3 == 2 {
                    valid = valid && (character == UInt8(ascii: ":") || character == UInt8(ascii: "-"))
                } else if let digit = Hex.value(of: character) {
                    value = value << 4 | UInt64(digit)
                } else {
                    valid = false
                }
            }
        }
        guard valid else {
            throw AdvertisementError(
                .invalidAddress, "\"\(text)\" is not a Bluetooth address such as A4:C1:38:AA:BB:CC")
        }
        self.rawValue = value
    }

    /// The six bytes in written order (`A4 C1 38 AA BB CC`): BTHome's nonce takes them so.
    public var bytes: [UInt8] {
        (0..<6).map { UInt8(truncatingIfNeeded: rawValue >> UInt64(40 - 8 * $0)) }
    }

    /// The six bytes least significant first (`CC BB AA 38 C1 A4`), as most advertisements carry them and as
    /// MiBeacon's nonce takes them.
    public var reversedBytes: [UInt8] {
        (0..<6).map { UInt8(truncatingIfNeeded: rawValue >> UInt64(8 * $0)) }
    }

    public var description: String {
        bytes.map { byte in
            let digits = String(byte, radix: 16, uppercase: true)
            return byte < 0x10 ? "0" + digits : digits
        }.joined(separator: ":")
    }
}

extension BluetoothAddress {
    /// The address of the low 48 bits of `value`.
    init(truncating value: UInt64) {
        self.rawValue = value & 0xFFFF_FFFF_FFFF
    }

    /// Reads six bytes at `offset` in `order` (bounds checked by the caller).
    init(_ bytes: [UInt8], at offset: Int, order: ByteReader.ByteOrder) {
        var value: UInt64 = 0
        for index in 0..<6 {
            let byte = bytes[order == .big ? offset &+ index : offset &+ 5 &- index]
            value = value << 8 | UInt64(byte)
        }
        self.rawValue = value
    }
}
