public import Readings

/// A tiny JSON object writer for one output line: keys in the order written, strings escaped per RFC 8259.
///
/// Hand-written rather than `JSONEncoder` so the key order is the documented one and a record costs a few
/// string appends, not a reflection walk.
struct JSONLine {
    private(set) var text = "{"
    private var first = true

    private mutating func key(_ name: String) {
        if !first { text += "," }
        first = false
        Self.appendString(name, to: &text)
        text += ":"
    }

    mutating func string(_ name: String, _ value: String) {
        key(name)
        Self.appendString(value, to: &text)
    }

    mutating func integer<T: BinaryInteger>(_ name: String, _ value: T) {
        key(name)
        text += String(value)
    }

    mutating func bool(_ name: String, _ value: Bool) {
        key(name)
        text += value ? "true" : "false"
    }

    mutating func null(_ name: String) {
        key(name)
        text += "null"
    }

    /// A value already written as JSON (a number, an array of numbers).
    mutating func rawValue(_ name: String, _ json: String) {
        key(name)
        text += json
    }

    /// A nested object.
    mutating func object(_ name: String, _ build: (inout JSONLine) -> Void) {
        key(name)
        var nested = JSONLine()
        build(&nested)
        text += nested.finished
    }

    /// An array of objects.
    mutating func array<S: Sequence>(_ name: String, _ elements: S, _ build: (inout JSONLine, S.Element) -> Void) {
        key(name)
        text += "["
        var firstElement = true
        for element in elements {
            if !firstElement { text += "," }
            firstElement = false
            var nested = JSONLine()
            build(&nested, element)
            text += nested.finished
        }
        text += "]"
    }

    var finished: String { text + "}" }

    static func appendString(_ value: String, to text: inout String) {
        text += "\""
        // Almost every string (names, addresses, UUIDs, ISO times) needs no escaping: append it whole.
        if !value.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            text += value
            text += "\""
            return
        }
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                text.unicodeScalars.append(scalar)
            }
        }
        text += "\""
    }
}

/// JSON string literals for the command's other JSON outputs (`scan`, `read`, `doctor`).
public enum JSONText {
    /// `value` as a JSON string literal, quotes included; control characters escaped (names come off the air).
    public static func quoted(_ value: String) -> String {
        var text = ""
        JSONLine.appendString(value, to: &text)
        return text
    }

    /// `readings` as the records write them: `{"battery":{"value":51,"unit":"%"}}`.
    public static func readings(_ readings: [Reading]) -> String {
        var line = JSONLine()
        line.readings("readings", readings)
        let object = line.finished
        // `{"readings":{…}}` → `{…}`.
        return String(object.dropFirst("{\"readings\":".count).dropLast())
    }

    /// `value` with control characters (ESC sequences from a radio-supplied name, newlines) made visible, for a
    /// terminal.
    public static func printable(_ value: String) -> String {
        String(String.UnicodeScalarView(value.unicodeScalars.map { scalar in
            scalar.value < 0x20 || scalar.value == 0x7F ? "\u{FFFD}" : scalar
        }))
    }
}

extension Array where Element == UInt8 {
    /// Lower-case hex, two digits a byte, no separators: how values appear in the output.
    var hexString: String {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count * 2)
        for byte in self {
            bytes.append(digits[Int(byte >> 4)])
            bytes.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
