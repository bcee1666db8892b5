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
    /// The UTF-8 written so far (the closing brace comes with `finished`). Bytes, not a `String`: a record's
    /// line is about 25 appends, and a `String` append costs a few hundred instructions where appending bytes
    /// costs a few dozen (Benchmarks/NOTES.md).
    private(set) var utf8: [UInt8]
    private var first = true

    package init() {
        utf8 = [UInt8(ascii: "{")]
        utf8.reserveCapacity(256)
    }

    /// A nested object written on at the end of its parent's bytes (no buffer of its own).
    fileprivate init(continuing bytes: [UInt8]) {
        utf8 = bytes
        utf8.append(UInt8(ascii: "{"))
    }

    private mutating func key(_ name: String) {
        if !first { utf8.append(UInt8(ascii: ",")) }
        first = false
        JSONString.append(name, to: &utf8)
        utf8.append(UInt8(ascii: ":"))
    }

    package mutating func string(_ name: String, _ value: String) {
        key(name)
        JSONString.append(value, to: &utf8)
    }

    package mutating func integer<T: BinaryInteger>(_ name: String, _ value: T) {
        key(name)
        JSONNumber.append(value, to: &utf8)
    }

    // The common widths without generics: called from another module, the generic one runs unspecialized, through
    // BinaryInteger's witness table, several times the cost of these (seven numbers a record).

    package mutating func integer(_ name: String, _ value: Int) {
        integer(name, Int64(value))
    }

    package mutating func integer(_ name: String, _ value: Int64) {
        key(name)
        JSONNumber.appendDigits(value.magnitude, negative: value < 0, to: &utf8)
    }

    package mutating func integer(_ name: String, _ value: UInt64) {
        key(name)
        JSONNumber.appendDigits(value, negative: false, to: &utf8)
    }

    package mutating func bool(_ name: String, _ value: Bool) {
        key(name)
        utf8.append(contentsOf: value ? "true".utf8 : "false".utf8)
    }

    package mutating func null(_ name: String) {
        key(name)
        utf8.append(contentsOf: "null".utf8)
    }

    /// A value already written as JSON (a number, an array of numbers).
    package mutating func rawValue(_ name: String, _ json: String) {
        key(name)
        utf8.append(contentsOf: json.utf8)
    }

    /// A nested object.
    package mutating func object(_ name: String, _ build: (inout JSONObject) -> Void) {
        key(name)
        var nested = JSONObject(continuing: utf8)
        utf8 = []  // the nested object holds the only reference: it appends in place
        build(&nested)
        utf8 = nested.utf8
        utf8.append(UInt8(ascii: "}"))
    }

    /// An array of objects, one per element.
    package mutating func array<S: Sequence>(
        _ name: String, _ elements: S, _ build: (inout JSONObject, S.Element) -> Void
    ) {
        array(name) { array in
            for element in elements {
                array.object { build(&$0, element) }
            }
        }
    }

    /// An array of anything.
    package mutating func array(_ name: String, _ build: (inout JSONArray) -> Void) {
        key(name)
        var nested = JSONArray(continuing: utf8)
        utf8 = []
        build(&nested)
        utf8 = nested.utf8
        utf8.append(UInt8(ascii: "]"))
    }

    package var finished: String { String(decoding: bytes, as: UTF8.self) }
    package var bytes: [UInt8] { utf8 + CollectionOfOne(UInt8(ascii: "}")) }
}

/// The elements of a JSON array, in the order written.
package struct JSONArray {
    private(set) var utf8: [UInt8]
    private var first = true

    package init() {
        utf8 = [UInt8(ascii: "[")]
    }

    fileprivate init(continuing bytes: [UInt8]) {
        utf8 = bytes
        utf8.append(UInt8(ascii: "["))
    }

    private mutating func separate() {
        if !first { utf8.append(UInt8(ascii: ",")) }
        first = false
    }

    package mutating func string(_ value: String) {
        separate()
        JSONString.append(value, to: &utf8)
    }

    package mutating func object(_ build: (inout JSONObject) -> Void) {
        separate()
        var nested = JSONObject(continuing: utf8)
        utf8 = []
        build(&nested)
        utf8 = nested.utf8
        utf8.append(UInt8(ascii: "}"))
    }

    package mutating func array(_ build: (inout JSONArray) -> Void) {
        separate()
        var nested = JSONArray(continuing: utf8)
        utf8 = []
        build(&nested)
        utf8 = nested.utf8
        utf8.append(UInt8(ascii: "]"))
    }

    package var finished: String { String(decoding: utf8 + CollectionOfOne(UInt8(ascii: "]")), as: UTF8.self) }
}

/// JSON string literals.
package enum JSONString {
    /// `value` as a JSON string, quotes included: `"`, `\` and control characters escaped, the rest as UTF-8.
    package static func append(_ value: String, to text: inout String) {
        var bytes: [UInt8] = []
        append(value, to: &bytes)
        text += String(decoding: bytes, as: UTF8.self)
    }

    /// `value` as a JSON string, quotes included, appended to UTF-8 `bytes`.
    package static func append(_ value: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            // Almost every string (names, addresses, UUIDs, ISO times) needs no escaping: appended whole.
            guard utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
                bytes.append(contentsOf: utf8)
                return
            }
            // Byte by byte: every byte of a multi-byte UTF-8 sequence is 0x80 or more, so only ASCII is escaped.
            for byte in utf8 {
                switch byte {
                case UInt8(ascii: "\""): bytes.append(contentsOf: #"\""#.utf8)
                case UInt8(ascii: "\\"): bytes.append(contentsOf: #"\\"#.utf8)
                case UInt8(ascii: "\n"): bytes.append(contentsOf: #"\n"#.utf8)
                case UInt8(ascii: "\r"): bytes.append(contentsOf: #"\r"#.utf8)
                case UInt8(ascii: "\t"): bytes.append(contentsOf: #"\t"#.utf8)
                case 0..<0x20:
                    let low = byte & 0x0F
                    bytes.append(contentsOf: #"\u00"#.utf8)
                    bytes.append(UInt8(ascii: "0") + byte >> 4)
                    bytes.append(low < 10 ? UInt8(ascii: "0") + low : UInt8(ascii: "a") + low - 10)
                default: bytes.append(byte)
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

/// JSON integers, written without a `String` in between.
enum JSONNumber {
    static func append<T: BinaryInteger>(_ value: T, to bytes: inout [UInt8]) {
        if let small = Int64(exactly: value) {
            appendDigits(small.magnitude, negative: small < 0, to: &bytes)
        } else {
            bytes.append(contentsOf: String(value).utf8)  // beyond 64 bits: rare
        }
    }

    static func appendDigits(_ magnitude: UInt64, negative: Bool, to bytes: inout [UInt8]) {
        if negative { bytes.append(UInt8(ascii: "-")) }
        let start = bytes.count
        var rest = magnitude
        repeat {
            bytes.append(UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        } while rest > 0
        bytes[start...].reverse()
    }
}

// MARK: Any value

extension JSONObject {
    /// A member holding any JSON value (a tree the reader made, written back).
    package mutating func value(_ name: String, _ value: JSONValue) {
        key(name)
        Self.append(value, to: &utf8)
    }

    fileprivate static func append(_ value: JSONValue, to utf8: inout [UInt8]) {
        switch value {
        case .null: utf8.append(contentsOf: "null".utf8)
        case .bool(let flag): utf8.append(contentsOf: (flag ? "true" : "false").utf8)
        case .integer(let number): JSONNumber.appendDigits(number.magnitude, negative: number < 0, to: &utf8)
        case .number(let text): utf8.append(contentsOf: text.utf8)
        case .string(let text): JSONString.append(text, to: &utf8)
        case .array(let elements):
            var nested = JSONArray(continuing: utf8)
            utf8 = []
            for element in elements { nested.value(element) }
            utf8 = nested.utf8
            utf8.append(UInt8(ascii: "]"))
        case .object(let members):
            var nested = JSONObject(continuing: utf8)
            utf8 = []
            for (name, member) in members { nested.value(name, member) }
            utf8 = nested.utf8
            utf8.append(UInt8(ascii: "}"))
        }
    }
}

extension JSONArray {
    /// An element holding any JSON value.
    package mutating func value(_ value: JSONValue) {
        separate()
        JSONObject.append(value, to: &utf8)
    }
}

extension JSONValue {
    /// Compact JSON in UTF-8, keys in their given order, no whitespace: byte for byte the same every time, which
    /// keeps retained messages comparable and tests exact.
    package func encoded() -> [UInt8] {
        var utf8: [UInt8] = []
        utf8.reserveCapacity(96)
        JSONObject.append(self, to: &utf8)
        return utf8
    }
}
