/// A tiny JSON writer for discovery payloads: keys in the order written, strings escaped per RFC 8259.
///
/// Hand-written rather than Foundation's `JSONSerialization` (the team is removing Foundation) and with the
/// key order fixed, so that a payload is byte-for-byte the same each time it is announced and tests can read it.
///
/// ```swift
/// var json = JSONText.Object()
/// json.string("name", "Temperature")
/// json.array("connections") { $0.array { $0.string("mac"); $0.string(address) } }
/// let payload = json.bytes
/// ```
enum JSONText {
    struct Object {
        private(set) var text = "{"
        private var first = true

        init() {}

        private mutating func key(_ name: String) {
            if !first { text += "," }
            first = false
            JSONText.appendString(name, to: &text)
            text += ":"
        }

        mutating func string(_ name: String, _ value: String) {
            key(name)
            JSONText.appendString(value, to: &text)
        }

        mutating func integer<T: BinaryInteger>(_ name: String, _ value: T) {
            key(name)
            text += String(value)
        }

        mutating func bool(_ name: String, _ value: Bool) {
            key(name)
            text += value ? "true" : "false"
        }

        mutating func object(_ name: String, _ build: (inout Object) -> Void) {
            key(name)
            var nested = Object()
            build(&nested)
            text += nested.finished
        }

        mutating func array(_ name: String, _ build: (inout Array) -> Void) {
            key(name)
            var nested = Array()
            build(&nested)
            text += nested.finished
        }

        var finished: String { text + "}" }
        var bytes: [UInt8] { Swift.Array(finished.utf8) }
    }

    struct Array {
        private(set) var text = "["
        private var first = true

        private mutating func separate() {
            if !first { text += "," }
            first = false
        }

        mutating func string(_ value: String) {
            separate()
            JSONText.appendString(value, to: &text)
        }

        mutating func object(_ build: (inout Object) -> Void) {
            separate()
            var nested = Object()
            build(&nested)
            text += nested.finished
        }

        mutating func array(_ build: (inout Array) -> Void) {
            separate()
            var nested = Array()
            build(&nested)
            text += nested.finished
        }

        var finished: String { text + "]" }
    }

    /// `value` as a JSON string: quotes, backslashes and control characters escaped, the rest as UTF-8.
    static func appendString(_ value: String, to text: inout String) {
        text += "\""
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
            default: text.unicodeScalars.append(scalar)
            }
        }
        text += "\""
    }
}
