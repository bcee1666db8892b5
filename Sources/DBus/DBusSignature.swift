/// A valid D-Bus type signature such as `a{oa{sa{sv}}}`, or the empty signature.
///
/// ```swift
/// let managedObjects: DBusSignature = "a{oa{sa{sv}}}"
/// let parts = try DBusSignature("sa{sv}as").completeTypes   // ["s", "a{sv}", "as"]
/// ```
public struct DBusSignature: RawRepresentable, Hashable, Sendable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    /// The signature as a string.
    public let rawValue: String

    /// Checks `rawValue` with libdbus's `dbus_signature_validate`; nil when invalid.
    public init?(rawValue: String) {
        guard Names.isValidSignature(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    /// Checks `string`; throws `DBusError.Code.invalidArgument` when it is not a valid signature.
    public init(_ string: String) throws {
        guard let signature = DBusSignature(rawValue: string) else {
            throw DBusError.invalidArgument("'\(string)' is not a valid D-Bus signature")
        }
        self = signature
    }

    /// A signature written in the source; an invalid literal is a programmer error and traps.
    public init(stringLiteral value: String) {
        precondition(Names.isValidSignature(value), "'\(value)' is not a valid D-Bus signature")
        self.rawValue = value
    }

    /// A signature that libdbus already validated, or that this module built from values.
    init(unchecked rawValue: String) {
        self.rawValue = rawValue
    }

    public var description: String { rawValue }

    /// The single complete types this signature is made of, in order (`"sa{sv}"` → `["s", "a{sv}"]`).
    public var completeTypes: [DBusSignature] {
        var result: [DBusSignature] = []
        let bytes = Array(rawValue.utf8)
        var index = 0
        while index < bytes.count {
            let end = Self.endOfCompleteType(bytes, from: index)
            result.append(DBusSignature(unchecked: String(decoding: bytes[index..<end], as: UTF8.self)))
            index = end
        }
        return result
    }

    /// True when this is exactly one complete type (what an array element or a variant holds).
    public var isSingleCompleteType: Bool {
        let bytes = Array(rawValue.utf8)
        return !bytes.isEmpty && Self.endOfCompleteType(bytes, from: 0) == bytes.count
    }

    /// The index just past the complete type starting at `start`, in an already valid signature.
    private static func endOfCompleteType(_ bytes: [UInt8], from start: Int) -> Int {
        var index = start
        // Arrays prefix their element type.
        while index < bytes.count, bytes[index] == UInt8(ascii: "a") { index += 1 }
        guard index < bytes.count else { return index }
        let open = bytes[index]
        guard open == UInt8(ascii: "(") || open == UInt8(ascii: "{") else { return index + 1 }
        var depth = 0
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "("), UInt8(ascii: "{"): depth += 1
            case UInt8(ascii: ")"), UInt8(ascii: "}"): depth -= 1
            default: break
            }
            index += 1
            if depth == 0 { break }
        }
        return index
    }
}
