/// Hexadecimal spellings for messages and for the `hex` format, without Foundation's `String(format:)`.
enum HexText {
    private static let lowercaseDigits: [Character] = Array("0123456789abcdef")

    /// `0x07FF`: uppercase, zero-padded to `digits`, as the Bluetooth specifications write raw values.
    static func number(_ value: UInt64, digits: Int) -> String {
        let text = String(value, radix: 16, uppercase: true)
        let padding = max(0, digits - text.count)
        return "0x" + String(repeating: "0", count: padding) + text
    }

    /// `0a1bff`: two lowercase digits a byte, no separators.
    static func bytes(_ bytes: some Collection<UInt8>) -> String {
        var text = ""
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(lowercaseDigits[Int(byte >> 4)])
            text.append(lowercaseDigits[Int(byte & 0x0F)])
        }
        return text
    }
}
