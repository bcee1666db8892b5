import JSONWriter

/// The few JSON shapes the fleet's messages use, with a bounded parser and a canonical encoder.
///
/// Written by hand so the pure target needs no Foundation. Numbers are integers only (every field of every fleet
/// message is an integer, a string or an object); a fraction or exponent is a malformed payload, not a rounding.
enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    /// A number that is not an integer within Int64 (`21.5`, `1e3`), as written; only from
    /// `JSONParser.parse(_:anyNumber:maximumBytes:)`, which reads records rather than fleet messages.
    case number(String)
    case string(String)
    case array([JSONValue])
    /// Keys in the order written: the encoder's output is stable byte for byte, which keeps retained messages
    /// comparable and tests exact.
    case object([(String, JSONValue)])

    static func == (left: JSONValue, right: JSONValue) -> Bool {
        switch (left, right) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.integer(let a), .integer(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// The value of `key` in an object, or nil (absent key or not an object).
    subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    var integerValue: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// Compact JSON in UTF-8, keys in their given order, no whitespace.
    func encoded() -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(96)
        append(to: &output)
        return output
    }

    private func append(to output: inout [UInt8]) {
        switch self {
        case .null: output.append(contentsOf: Array("null".utf8))
        case .bool(let value): output.append(contentsOf: Array((value ? "true" : "false").utf8))
        case .integer(let value): output.append(contentsOf: Array(String(value).utf8))
        case .number(let text): output.append(contentsOf: Array(text.utf8))
        case .string(let value): Self.appendString(value, to: &output)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                element.append(to: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                Self.appendString(member.0, to: &output)
                output.append(UInt8(ascii: ":"))
                member.1.append(to: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    /// The package's one JSON string escaping (module JSONWriter), as UTF-8.
    private static func appendString(_ string: String, to output: inout [UInt8]) {
        var text = ""
        JSONString.append(string, to: &text)
        output.append(contentsOf: text.utf8)
    }
}
