/// A Swift type that a `DBusValue` can be decoded into, strictly by D-Bus signature.
///
/// Decoding never traps: a value of another type throws `DBusError.Code.typeMismatch` whose message names the
/// signature expected and the one found. `DBusValue` itself decodes from anything (unwrapping one variant), so
/// `[String: DBusValue]` reads an `a{sv}` property dictionary.
///
/// ```swift
/// let objects = try reply.decode([ObjectPath: [String: [String: DBusValue]]].self)
/// let (name, count) = try arguments.decode(String.self, UInt32.self)
/// ```
public protocol DBusDecodable: Sendable {
    /// The signature a value must have to decode into this type.
    static var dbusSignature: DBusSignature { get }
    /// Decodes `value`, throwing `DBusError.Code.typeMismatch` when its type differs.
    init(dbusValue value: DBusValue) throws
}

extension DBusDecodable {
    static func mismatch(_ value: DBusValue) -> DBusError {
        DBusError.typeMismatch(expected: dbusSignature.rawValue, found: value.signature.rawValue)
    }
}

extension DBusValue {
    /// Decodes this value as `type`; throws `DBusError.Code.typeMismatch` on a different type.
    public func decode<T: DBusDecodable>(_ type: T.Type = T.self) throws -> T {
        try T(dbusValue: self)
    }
}

extension Array where Element == DBusValue {
    /// Throws `DBusError.Code.typeMismatch` unless these arguments have exactly `signature`.
    public func expect(_ signature: DBusSignature) throws {
        let found = self.signature
        guard found == signature else {
            throw DBusError.typeMismatch(expected: signature.rawValue, found: found.rawValue)
        }
    }

    /// Decodes these arguments, one type per argument (`try args.decode(String.self, [String: DBusValue].self)`).
    /// Throws `DBusError.Code.typeMismatch`, naming the whole signature expected and found, when the count or
    /// any type differs.
    public func decode<each T: DBusDecodable>(_ types: repeat (each T).Type) throws -> (repeat each T) {
        var expected = ""
        var count = 0
        for type in repeat each types {
            expected += type.dbusSignature.rawValue
            count += 1
        }
        let mismatch = DBusError.typeMismatch(expected: expected, found: signature.rawValue)
        guard count == self.count else { throw mismatch }
        var index = 0
        func next<U: DBusDecodable>(_ type: U.Type) throws -> U {
            defer { index += 1 }
            do { return try U(dbusValue: self[index]) } catch { throw mismatch }
        }
        return (repeat try next(each types))
    }
}

// MARK: - Conformances

extension DBusValue: DBusDecodable {
    public static var dbusSignature: DBusSignature { "v" }
    /// Accepts any value; a variant is unwrapped one level (so `a{sv}` values come out as their content).
    public init(dbusValue value: DBusValue) throws {
        if case .variant(let inner) = value { self = inner } else { self = value }
    }
}

extension String: DBusDecodable {
    public static var dbusSignature: DBusSignature { "s" }
    public init(dbusValue value: DBusValue) throws {
        guard case .string(let v) = value else { throw Self.mismatch(value) }
        self = v
    }
}

extension ObjectPath: DBusDecodable {
    public static var dbusSignature: DBusSignature { "o" }
    public init(dbusValue value: DBusValue) throws {
        guard case .objectPath(let v) = value else { throw Self.mismatch(value) }
        self = v
    }
}

extension DBusSignature: DBusDecodable {
    public static var dbusSignature: DBusSignature { "g" }
    public init(dbusValue value: DBusValue) throws {
        guard case .signature(let v) = value else { throw Self.mismatch(value) }
        self = v
    }
}

extension Bool: DBusDecodable {
    public static var dbusSignature: DBusSignature { "b" }
    public init(dbusValue value: DBusValue) throws {
        guard case .boolean(let v) = value else { throw Self.mismatch(value) }
        self = v
    }
}

extension UInt8: DBusDecodable {
    public static var dbusSignature: DBusSignature { "y" }
    public init(dbusValue value: DBusValue) throws {
        guard case .byte(let v) = value else { throw Self.mismatch(value) }
        self = v
    }
}

extension Int16: DBusDecodable {
    public static var dbusSignature: DBusSignature { "n" }
    public init(dbusValue value: DBusValue) throws {
        guard case .int16(let v) = value else { throw Self.mismatch(value) }
        self = v
    }
}

extension UInt16: DBusDecodable {
    public static var dbusSignature: DBusSignature { "q" }
    public init(dbusValue value: DBusValue) throws {
        guard case .uint16(let v) = value else { throw Self.mismatch(value) }
        self = v
    }
}

extension Int32: DBusDecodable {
    public static var dbusSignature: DBusSignature { "i" }
    public init(dbusValue value: DBusValue) throws {
        guard case .int32(let v) = value else { throw Self.mismatch(value) }
        self = v
    }
}

extension UInt32: DBusDecodable {
    public static var dbusSignature: DBusSignature { "u" }
    public init(dbusValue value: DBusValue) throws {
        guard case .uint32(let v) = value else { throw Self.mismatch(value) }
        self = v
    }
}

extension Int64: DBusDecodable {
    public static var dbusSignature: DBusSignature { "x" }
    public init(dbusValue value: DBusValue) throws {
        guard case .int64(let v) = value else { throw Self.mismatch(value) }
        self = v
    }
}

extension UInt64: DBusDecodable {
    public static var dbusSignature: DBusSignature { "t" }
    public init(dbusValue value: DBusValue) throws {
        guard case .uint64(let v) = value else { throw Self.mismatch(value) }
        self = v
    }
}

extension Double: DBusDecodable {
    public static var dbusSignature: DBusSignature { "d" }
    public init(dbusValue value: DBusValue) throws {
        guard case .double(let v) = value else { throw Self.mismatch(value) }
        self = v
    }
}

extension UnixFileDescriptor: DBusDecodable {
    public static var dbusSignature: DBusSignature { "h" }
    /// The very descriptor the value holds (no duplicate): it stays owned once, shared with `value`.
    public convenience init(dbusValue value: DBusValue) throws {
        guard case .unixFileDescriptor(let descriptor) = value else { throw Self.mismatch(value) }
        self.init(sharing: descriptor)
    }
}

/// Lets a class's initialiser return an existing instance: a protocol extension's initialiser may assign `self`,
/// a class's own may not. `UnixFileDescriptor` uses it to decode without duplicating its descriptor.
private protocol SharingInitializer {}

extension SharingInitializer {
    init(sharing existing: Self) {
        self = existing
    }
}

extension UnixFileDescriptor: SharingInitializer {}

extension Array: DBusDecodable where Element: DBusDecodable {
    public static var dbusSignature: DBusSignature {
        DBusSignature(unchecked: "a" + Element.dbusSignature.rawValue)
    }

    /// `[UInt8]` also accepts `.bytes`; `[DBusValue]` accepts an array of any element type.
    public init(dbusValue value: DBusValue) throws {
        switch value {
        case .bytes(let bytes) where Element.self == UInt8.self:
            self = bytes as! [Element]  // checked by the `where` clause above
        case .bytes(let bytes) where Element.self == DBusValue.self:
            self = bytes.map(DBusValue.byte) as! [Element]  // checked by the `where` clause above
        case .array(let element, let values):
            guard Element.self == DBusValue.self || element == Element.dbusSignature else {
                throw Self.mismatch(value)
            }
            var result: [Element] = []
            result.reserveCapacity(values.count)
            do {
                for item in values { result.append(try Element(dbusValue: item)) }
            } catch {
                throw Self.mismatch(value)
            }
            self = result
        default:
            throw Self.mismatch(value)
        }
    }
}

extension Dictionary: DBusDecodable where Key: DBusDecodable, Value: DBusDecodable {
    public static var dbusSignature: DBusSignature {
        DBusSignature(unchecked: "a{" + Key.dbusSignature.rawValue + Value.dbusSignature.rawValue + "}")
    }

    /// Entries are read in wire order; a repeated key keeps its last value.
    public init(dbusValue value: DBusValue) throws {
        guard case .dictionary(let keySignature, let valueSignature, let entries) = value,
            keySignature == Key.dbusSignature,
            Value.self == DBusValue.self || valueSignature == Value.dbusSignature
        else { throw Self.mismatch(value) }
        var result: [Key: Value] = [:]
        result.reserveCapacity(entries.count)
        do {
            for entry in entries {
                result[try Key(dbusValue: entry.key)] = try Value(dbusValue: entry.value)
            }
        } catch {
            throw Self.mismatch(value)
        }
        self = result
    }
}
