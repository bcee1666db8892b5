/// One D-Bus value of any type, as it travels in a message.
///
/// Every D-Bus type has a case. Containers carry their element signatures so that empty arrays and dictionaries
/// keep their type on the wire. `ay` has its own case, `.bytes`, stored as one `[UInt8]` and copied in and out of
/// messages in one piece.
///
/// ```swift
/// let filter: DBusValue = .dictionary(key: "s", value: "v", [
///     .init(key: .string("Transport"), value: .variant(.string("le"))),
///     .init(key: .string("UUIDs"), value: .variant(.array(element: "s", []))),
/// ])
/// filter.signature                                    // "a{sv}"
/// DBusValue.uint32(7).uint32                          // 7
/// try DBusValue.string("hi").decode(UInt32.self)      // throws .typeMismatch: expected 'u', found 's'
/// ```
///
/// A `.unixFileDescriptor` holds a `UnixFileDescriptor`, which owns an open descriptor: values compare and hash
/// it by identity, and copies of a value share it (see `UnixFileDescriptor`).
///
/// Only the cases that would make every value wider are `indirect` (`array` and `dictionary`, which carry
/// signatures besides their elements) or must be (`variant`): a number, a string or a path is stored inline, in
/// 17 bytes, not in a heap box of its own. Decoding BlueZ's tree of 10,000 devices made 3 million allocations
/// when every case was boxed.
public enum DBusValue: Hashable, Sendable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(ObjectPath)
    case signature(DBusSignature)
    /// `h`: a Unix file descriptor, owned by the `UnixFileDescriptor` (equal only to itself). Only a connection
    /// over a Unix socket can send one; others throw `DBusError.Code.unsupportedType`.
    case unixFileDescriptor(UnixFileDescriptor)
    /// `ay`: always how a received byte array is decoded.
    case bytes([UInt8])
    /// An array of values that all have the single complete type `element` (for `ay` prefer `.bytes`).
    indirect case array(element: DBusSignature, [DBusValue])
    /// `a{kv}`: ordered entries; `key` must be a basic type.
    indirect case dictionary(key: DBusSignature, value: DBusSignature, [DBusDictionaryEntry])
    /// `(…)`: at least one field.
    case structure([DBusValue])
    /// `v`: a value that carries its own type; variants may nest.
    indirect case variant(DBusValue)

    /// This value's D-Bus signature.
    public var signature: DBusSignature {
        var text = ""
        appendSignature(to: &text)
        return DBusSignature(unchecked: text)
    }

    /// The ASCII type code of this value (`s`, `a`, `(`, `v`…).
    var typeCode: UInt8 {
        switch self {
        case .byte: UInt8(ascii: "y")
        case .boolean: UInt8(ascii: "b")
        case .int16: UInt8(ascii: "n")
        case .uint16: UInt8(ascii: "q")
        case .int32: UInt8(ascii: "i")
        case .uint32: UInt8(ascii: "u")
        case .int64: UInt8(ascii: "x")
        case .uint64: UInt8(ascii: "t")
        case .double: UInt8(ascii: "d")
        case .string: UInt8(ascii: "s")
        case .objectPath: UInt8(ascii: "o")
        case .signature: UInt8(ascii: "g")
        case .unixFileDescriptor: UInt8(ascii: "h")
        case .bytes, .array, .dictionary: UInt8(ascii: "a")
        case .structure: UInt8(ascii: "(")
        case .variant: UInt8(ascii: "v")
        }
    }

    func appendSignature(to text: inout String) {
        switch self {
        case .bytes: text += "ay"
        case .array(let element, _):
            text += "a"
            text += element.rawValue
        case .dictionary(let key, let value, _):
            text += "a{"
            text += key.rawValue
            text += value.rawValue
            text += "}"
        case .structure(let fields):
            text += "("
            for field in fields { field.appendSignature(to: &text) }
            text += ")"
        default:
            text.unicodeScalars.append(Unicode.Scalar(typeCode))
        }
    }
}

/// One entry of a `DBusValue.dictionary`.
///
/// ```swift
/// DBusDictionaryEntry(key: .string("Powered"), value: .variant(.boolean(true)))
/// ```
public struct DBusDictionaryEntry: Hashable, Sendable {
    public var key: DBusValue
    public var value: DBusValue

    public init(key: DBusValue, value: DBusValue) {
        self.key = key
        self.value = value
    }
}

// MARK: - Typed accessors: nil when the value has another type (variants are not unwrapped).

extension DBusValue {
    public var byte: UInt8? { if case .byte(let v) = self { v } else { nil } }
    public var boolean: Bool? { if case .boolean(let v) = self { v } else { nil } }
    public var int16: Int16? { if case .int16(let v) = self { v } else { nil } }
    public var uint16: UInt16? { if case .uint16(let v) = self { v } else { nil } }
    public var int32: Int32? { if case .int32(let v) = self { v } else { nil } }
    public var uint32: UInt32? { if case .uint32(let v) = self { v } else { nil } }
    public var int64: Int64? { if case .int64(let v) = self { v } else { nil } }
    public var uint64: UInt64? { if case .uint64(let v) = self { v } else { nil } }
    public var double: Double? { if case .double(let v) = self { v } else { nil } }
    public var string: String? { if case .string(let v) = self { v } else { nil } }
    public var objectPath: ObjectPath? { if case .objectPath(let v) = self { v } else { nil } }
    public var signatureValue: DBusSignature? { if case .signature(let v) = self { v } else { nil } }
    public var unixFileDescriptor: UnixFileDescriptor? {
        if case .unixFileDescriptor(let v) = self { v } else { nil }
    }
    /// The bytes of an `ay`, whether it is held as `.bytes` or as an `.array` of `.byte`.
    public var bytes: [UInt8]? {
        switch self {
        case .bytes(let v): return v
        case .array(let element, let values) where element.rawValue == "y":
            var result: [UInt8] = []
            result.reserveCapacity(values.count)
            for value in values {
                guard case .byte(let byte) = value else { return nil }
                result.append(byte)
            }
            return result
        default: return nil
        }
    }
    /// The elements of an array (`.bytes` become `.byte` values).
    public var array: [DBusValue]? {
        switch self {
        case .array(_, let values): values
        case .bytes(let bytes): bytes.map(DBusValue.byte)
        default: nil
        }
    }
    /// The entries of a dictionary, in wire order.
    public var dictionaryEntries: [DBusDictionaryEntry]? {
        if case .dictionary(_, _, let entries) = self { entries } else { nil }
    }
    /// The fields of a struct.
    public var structure: [DBusValue]? { if case .structure(let v) = self { v } else { nil } }
    /// The content of a variant (one level).
    public var variant: DBusValue? { if case .variant(let v) = self { v } else { nil } }
    /// The innermost content of nested variants, or the value itself when it is no variant.
    public var unwrappingVariants: DBusValue {
        var value = self
        while case .variant(let inner) = value { value = inner }
        return value
    }
}

extension DBusValue: CustomStringConvertible {
    public var description: String {
        switch self {
        case .byte(let v): "byte(\(v))"
        case .boolean(let v): "\(v)"
        case .int16(let v): "int16(\(v))"
        case .uint16(let v): "uint16(\(v))"
        case .int32(let v): "int32(\(v))"
        case .uint32(let v): "uint32(\(v))"
        case .int64(let v): "int64(\(v))"
        case .uint64(let v): "uint64(\(v))"
        case .double(let v): "\(v)"
        case .string(let v): "\"\(v)\""
        case .objectPath(let v): "objectPath(\(v))"
        case .signature(let v): "signature(\(v))"
        case .unixFileDescriptor(let v): "unixFileDescriptor(\(v.rawValue.map(String.init) ?? "closed"))"
        case .bytes(let v): "bytes(\(v.count))"
        case .array(let element, let values): "a\(element)\(values)"
        case .dictionary(_, _, let entries):
            "{" + entries.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"
        case .structure(let fields): "(" + fields.map(\.description).joined(separator: ", ") + ")"
        case .variant(let v): "<\(v)>"
        }
    }
}

extension Array where Element == DBusValue {
    /// The signature of these values as message arguments (`[.string("a"), .uint32(1)]` → `"su"`).
    public var signature: DBusSignature {
        var text = ""
        for value in self { value.appendSignature(to: &text) }
        return DBusSignature(unchecked: text)
    }
}
