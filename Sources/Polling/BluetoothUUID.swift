import KeepAlive
import Basics

/// A Bluetooth attribute UUID, accepted in its 16-, 32- or 128-bit form and kept as 128 bits.
///
/// Short forms expand over the Bluetooth base UUID `0000xxxx-0000-1000-8000-00805f9b34fb`, so `"2a19"`,
/// `"00002A19"` and `"00002a19-0000-1000-8000-00805f9b34fb"` are the same value.
///
/// ```swift
/// let battery = try BluetoothUUID("2A19")
/// battery.description        // "00002a19-0000-1000-8000-00805f9b34fb"
/// battery.shortDescription   // "2a19"
/// ```
public struct BluetoothUUID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The 128 bits, most significant half first. Kept inline, not as an array of bytes: a UUID in a table (the
    /// BlueZ cache holds one per GATT object, ≈ 12 per connected device) then costs no allocation of its own.
    let high: UInt64
    let low: UInt64

    /// The 16 bytes, most significant first.
    public var bytes: [UInt8] {
        (0..<16).map { index in UInt8(truncatingIfNeeded: (index < 8 ? high : low) >> (56 - 8 * UInt64(index % 8))) }
    }

    /// Why a string is not a UUID; the message quotes the input.
    public struct ParseError: Error, Hashable, Sendable, CustomStringConvertible {
        public var input: String
        public var reason: String
        public var description: String { "invalid Bluetooth UUID \"\(input)\": \(reason)" }
    }

    /// The Bluetooth base UUID's bits below a 16- or 32-bit value: `0000xxxx-0000-1000-8000-00805f9b34fb`.
    private static let baseHigh: UInt64 = 0x0000_1000
    private static let baseLow: UInt64 = 0x8000_0080_5F9B_34FB

    /// The UUID of 16 bytes, most significant first (``bytes`` read back).
    package init(packing bytes: [UInt8]) {
        precondition(bytes.count == 16, "a UUID is 16 bytes")
        var high: UInt64 = 0
        var low: UInt64 = 0
        for byte in bytes[0..<8] { high = high << 8 | UInt64(byte) }
        for byte in bytes[8..<16] { low = low << 8 | UInt64(byte) }
        self.high = high
        self.low = low
    }

    private init(short value: UInt32) {
        high = UInt64(value) << 32 | Self.baseHigh
        low = Self.baseLow
    }

    public init(_ string: String) throws {
        let trimmed = string.hasPrefix("0x") || string.hasPrefix("0X") ? String(string.dropFirst(2)) : string
        let utf8 = Array(trimmed.utf8)
        func hexBytes(_ digits: [UInt8]) throws -> [UInt8] {
            var result: [UInt8] = []
            result.reserveCapacity(digits.count / 2)
            var index = 0
            while index < digits.count {
                guard let high = Hex.value(of: digits[index]), let low = Hex.value(of: digits[index + 1]) else {
                    throw ParseError(input: string, reason: "only hexadecimal digits are allowed")
                }
                result.append(high << 4 | low)
                index += 2
            }
            return result
        }
        switch utf8.count {
        case 4, 8:
            self.init(short: try hexBytes(utf8).reduce(0) { $0 << 8 | UInt32($1) })
        case 36:
            let dashes = [8, 13, 18, 23]
            for (offset, byte) in utf8.enumerated() where (byte == UInt8(ascii: "-")) != dashes.contains(offset) {
                throw ParseError(input: string, reason: "a 128-bit UUID is written 8-4-4-4-12")
            }
            self.init(packing: try hexBytes(utf8.filter { $0 != UInt8(ascii: "-") }))
        case 32:
            self.init(packing: try hexBytes(utf8))
        default:
            throw ParseError(
                input: string,
                reason: "expected 4 (16-bit), 8 (32-bit) or 32 hex digits (128-bit, optionally 8-4-4-4-12)"
            )
        }
    }

    /// The UUID `text` spells exactly in ``description``'s form (lower case 8-4-4-4-12, as BlueZ writes its
    /// `UUID` properties), nil for any other text. One pass over the bytes: BlueZ's object cache reads a UUID
    /// from every GATT object a signal adds, and parsing it generally and formatting it back to compare cost an
    /// order of magnitude more (Benchmarks/NOTES.md, "CPU per poll").
    package init?(exactDescription text: String) {
        var text = text
        let parsed: (UInt64, UInt64)? = text.withUTF8 { bytes in
            guard bytes.count == 36 else { return nil }
            var halves: (UInt64, UInt64) = (0, 0)
            var nibbles = 0
            for (offset, byte) in bytes.enumerated() {
                if offset == 8 || offset == 13 || offset == 18 || offset == 23 {
                    guard byte == UInt8(ascii: "-") else { return nil }
                    continue
                }
                let value: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): value = byte - UInt8(ascii: "a") + 10
                default: return nil
                }
                if nibbles < 16 {
                    halves.0 = halves.0 << 4 | UInt64(value)
                } else {
                    halves.1 = halves.1 << 4 | UInt64(value)
                }
                nibbles += 1
            }
            return halves
        }
        guard let (high, low) = parsed else { return nil }
        self.high = high
        self.low = low
    }

    /// A 16-bit assigned number, e.g. `0x2A19` (Battery Level).
    public init(assigned value: UInt16) {
        self.init(short: UInt32(value))
    }

    /// Lower-case 8-4-4-4-12, the form BlueZ uses in its `UUID` properties.
    public var description: String {
        // Formatted as ASCII bytes: it is on every poll's path (record keys, error contexts), and a String per
        // byte was one of the largest items of a poll's profile (Benchmarks/NOTES.md).
        var text: [UInt8] = []
        text.reserveCapacity(36)
        for nibble in 0..<32 {
            if nibble == 8 || nibble == 12 || nibble == 16 || nibble == 20 { text.append(UInt8(ascii: "-")) }
            text.append(Hex.digit(self.nibble(nibble)))
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The 16-bit assigned number (`0x2A19` for Battery Level) when the UUID is a 16-bit UUID on the Bluetooth
    /// base, else `nil`: how the SIG's tables (`SIGCharacteristics`) know a characteristic.
    public var assignedNumber: UInt16? {
        guard isOnBase, high >> 48 == 0 else { return nil }
        return UInt16(truncatingIfNeeded: high >> 32)
    }

    /// Hex digit `index` (0–31) of the 128 bits, most significant first.
    private func nibble(_ index: Int) -> UInt8 {
        UInt8(truncatingIfNeeded: (index < 16 ? high : low) >> (60 - 4 * UInt64(index % 16))) & 0xF
    }

    private var isOnBase: Bool { high & 0xFFFF_FFFF == Self.baseHigh && low == Self.baseLow }

    /// The 16- or 32-bit form when the UUID is on the Bluetooth base, else the full form.
    public var shortDescription: String {
        guard isOnBase else { return description }
        var text: [UInt8] = []
        text.reserveCapacity(8)
        for nibble in (high >> 48 == 0 ? 4 : 0)..<8 {
            text.append(Hex.digit(self.nibble(nibble)))
        }
        return String(decoding: text, as: UTF8.self)
    }

    public static func < (lhs: BluetoothUUID, rhs: BluetoothUUID) -> Bool {
        (lhs.high, lhs.low) < (rhs.high, rhs.low)
    }
}
