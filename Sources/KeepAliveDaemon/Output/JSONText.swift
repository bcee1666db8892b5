public import Readings
import Basics

/// JSON string literals for the command's other JSON outputs (`scan`, `read`, `doctor`).
public enum JSONText {
    /// `value` as a JSON string literal, quotes included; control characters escaped (names come off the air).
    public static func quoted(_ value: String) -> String {
        var text = ""
        JSONString.append(value, to: &text)
        return text
    }

    /// `readings` as the records write them: `{"battery":{"value":51,"unit":"%"}}`.
    public static func readings(_ readings: [Reading]) -> String {
        var line = JSONObject()
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
        Hex.string(self)
    }
}
