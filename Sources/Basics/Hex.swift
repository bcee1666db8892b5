/// Hexadecimal, the one reader and writer of it: values in the output and the logs, UUIDs, write values, JSON's
/// `\u` escapes, BlueZ's object paths. Inlinable: UUIDs and object paths are read a digit at a time on every poll's
/// path, and a call into another module per digit showed in the CPU a poll costs.
package enum Hex {
    /// The value of one hexadecimal digit, either case, or `nil`.
    @inlinable package static func value(of digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit &- UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit &- UInt8(ascii: "a") &+ 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit &- UInt8(ascii: "A") &+ 10
        default: nil
        }
    }

    /// The value of one lower-case hexadecimal digit, or `nil`: for text whose writer uses lower case only
    /// (bluetoothd's object paths), where an upper-case digit is not that writer's.
    @inlinable package static func lowercaseValue(of digit: UInt8) -> UInt8? {
        digit >= UInt8(ascii: "A") && digit <= UInt8(ascii: "F") ? nil : value(of: digit)
    }

    /// The lower-case digit of a value 0–15.
    @inlinable package static func digit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") &+ nibble : UInt8(ascii: "a") &+ nibble &- 10
    }

    /// Bytes from pairs of digits (either case), no separators; `nil` for an odd count or anything not a digit.
    @inlinable package static func bytes(_ text: some StringProtocol) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count.isMultiple(of: 2) else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = value(of: digits[index]), let low = value(of: digits[index &+ 1]) else { return nil }
            bytes.append(high << 4 | low)
            index &+= 2
        }
        return bytes
    }

    /// `0a1bff`: two lower-case digits a byte, no separators.
    @inlinable package static func string(_ bytes: some Collection<UInt8>) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digit(byte >> 4))
            text.append(digit(byte & 0x0F))
        }
        return String(decoding: text, as: UTF8.self)
    }
}
