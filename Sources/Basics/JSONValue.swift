
/// A JSON document as the one reader (``JSONParser``) reads it; the one writer writes it back
/// (``JSONValue/encoded()``, in JSONWriter.swift).
///
/// Written by hand so the pure target needs no Foundation. Numbers are integers only (every field of every fleet
/// message is an integer, a string or an object); a fraction or exponent is a malformed payload, not a rounding.
package enum JSONValue: Equatable, Sendable {
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

    package static func == (left: JSONValue, right: JSONValue) -> Bool {
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
    package subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    package var integerValue: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    package var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }
}
