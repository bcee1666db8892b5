import Basics

/// Hexadecimal spellings for messages and for the `hex` format, without Foundation's `String(format:)`.
enum HexText {
    /// `0x07FF`: uppercase, zero-padded to `digits`, as the Bluetooth specifications write raw values.
    static func number(_ value: UInt64, digits: Int) -> String {
        let text = String(value, radix: 16, uppercase: true)
        let padding = max(0, digits - text.count)
        return "0x" + String(repeating: "0", count: padding) + text
    }

    /// `0a1bff`: two lowercase digits a byte, no separators.
    static func bytes(_ bytes: some Collection<UInt8>) -> String {
        Hex.string(bytes)
    }
}
