/// JSON written by hand, for the package's outputs: a record's line (hot: a few appends, no reflection), the
/// bridge's discovery payloads, the log's JSON. Keys come out in the order they are written, so an output is
/// byte-for-byte the same every time and its documented key order holds; strings are escaped per RFC 8259.
/// No Foundation.
///
/// ```swift
/// var json = JSONObject()
/// json.string("device", "greenhouse-north")
/// json.integer("seq", 7)
/// json.array("connections") { $0.array { $0.string("mac"); $0.string(address) } }
/// let line = json.finished   // {"device":"greenhouse-north","seq":7,"connections":[["mac","C0:…"]]}
/// ```
package struct JSONObject {
    private(set) var text = "{"
    private var first = true

    package init() {}

    private mutating func key(_ name: String) {
        if !first { text += "," }
        first = false
        JSONString.append(name, to: &text)
        text += ":"
    }

    package mutating func string(_ name: String, _ value: String) {
        key(name)
        JSONString.append(value, to: &text)
    }

    package mutating func integer<T: BinaryInteger>(_ name: String, _ value: T) {
        key(name)
        text += String(value)
    }

    package mutating func bool(_ name: String, _ value: Bool) {
        key(name)
        text += value ? "true" : "false"
    }

    package mutating func null(_ name: String) {
        key(name)
        text += "null"
    }

    /// A value already written as JSON (a number, an array of numbers).
    package mutating func rawValue(_ name: String, _ json: String) {
        key(name)
        text += json
    }

    /// A nested object.
    package mutating func object(_ name: String, _ build: (inout JSONObject) -> Void) {
        key(name)
        var nested = JSONObject()
        build(&nested)
        text += nested.finished
    }

    /// An array of objects, one per element.
    package mutating func array<S: Sequence>(_ name: String, _ elements: S, _ build: (inout JSONObject, S.Element) -> Void) {
        key(name)
        var array = JSONArray()
        for element in elements {
            array.object { build(&$0, element) }
        }
        text += array.finished
    }

    /// An array of anything.
    package mutating func array(_ name: String, _ build: (inout JSONArray) -> Void) {
        key(name)
        var nested = JSONArray()
        build(&nested)
        text += nested.finished
    }

    package var finished: String { text + "}" }
    package var bytes: [UInt8] { Array(finished.utf8) }
}

/// The elements of a JSON array, in the order written.
package struct JSONArray {
    private(set) var text = "["
    private var first = true

    package init() {}

    private mutating func separate() {
        if !first { text += "," }
        first = false
    }

    package mutating func string(_ value: String) {
        separate()
        JSONString.append(value, to: &text)
    }

    package mutating func object(_ build: (inout JSONObject) -> Void) {
        separate()
        var nested = JSONObject()
        build(&nested)
        text += nested.finished
    }

    package mutating func array(_ build: (inout JSONArray) -> Void) {
        separate()
        var nested = JSONArray()
        build(&nested)
        text += nested.finished
    }

    package var finished: String { text + "]" }
}

/// JSON string literals.
package enum JSONString {
    /// `value` as a JSON string, quotes included: `"`, `\` and control characters escaped, the rest as UTF-8.
    package static func append(_ value: String, to text: inout String) {
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
