/// The wire format of one value: width, signedness, byte order, or text.
///
/// Configuration files spell formats as the case names (`uint16le`, `sint24be`, `float32le`,
/// `sfloat`, `utf8`, `hex`, …); ``init(parsing:)`` accepts exactly those spellings.
public enum ValueFormat: String, Sendable, Hashable, CaseIterable {
    /// Unsigned integers of 1, 2, 3, 4 or 8 bytes, little (`le`) or big (`be`) endian.
    case uint8, uint16le, uint16be, uint24le, uint24be, uint32le, uint32be, uint64le, uint64be
    /// Two's-complement signed integers of 1, 2, 3, 4 or 8 bytes, little or big endian.
    case sint8, sint16le, sint16be, sint24le, sint24be, sint32le, sint32be, sint64le, sint64be
    /// IEEE-754 binary32.
    case float32le, float32be
    /// IEEE-754 binary64.
    case float64le, float64be
    /// IEEE-11073 16-bit SFLOAT (GSS "medfloat16"), little endian: 4-bit exponent, 12-bit mantissa.
    case sfloat
    /// IEEE-11073 32-bit FLOAT (GSS "medfloat32"), little endian: 8-bit exponent, 24-bit mantissa.
    case float
    /// UTF-8 text filling the rest of the payload; trailing NUL bytes are trimmed.
    case utf8
    /// The rest of the payload as lowercase hexadecimal text.
    case hex

    /// Parses a configuration spelling such as `uint16le` or `sfloat`.
    /// - Throws: ``ReadingError/Code/unknownFormatName`` naming the accepted spellings.
    public init(parsing name: String) throws(ReadingError) {
        guard let format = ValueFormat(rawValue: name) else {
            let known = ValueFormat.allCases.map(\.rawValue).joined(separator: ", ")
            throw ReadingError(.unknownFormatName, "unknown format \"\(name)\"; known formats: \(known)")
        }
        self = format
    }

    /// The number of bytes the value occupies; `nil` for `utf8` and `hex`, which take the rest of the payload.
    public var byteCount: Int? {
        switch self {
        case .uint8, .sint8: 1
        case .uint16le, .uint16be, .sint16le, .sint16be, .sfloat: 2
        case .uint24le, .uint24be, .sint24le, .sint24be: 3
        case .uint32le, .uint32be, .sint32le, .sint32be, .float32le, .float32be, .float: 4
        case .uint64le, .uint64be, .sint64le, .sint64be, .float64le, .float64be: 8
        case .utf8, .hex: nil
        }
    }

    /// Whether the format decodes to a number (everything but `utf8` and `hex`).
    public var isNumeric: Bool { byteCount != nil }

    /// Whether the format is an integer (so a presentation exponent applies to it).
    public var isInteger: Bool {
        switch representation {
        case .unsigned, .signed: true
        default: false
        }
    }

    /// How the bytes are to be read: the data the decoder and encoder switch on.
    enum Representation: Sendable, Hashable {
        case unsigned(byteCount: Int, order: ByteReader.ByteOrder)
        case signed(byteCount: Int, order: ByteReader.ByteOrder)
        case binary32(order: ByteReader.ByteOrder)
        case binary64(order: ByteReader.ByteOrder)
        case medical16
        case medical32
        case text
        case hex
    }

    var representation: Representation {
        switch self {
        case .uint8: .unsigned(byteCount: 1, order: .little)
        case .uint16le: .unsigned(byteCount: 2, order: .little)
        case .uint16be: .unsigned(byteCount: 2, order: .big)
        case .uint24le: .unsigned(byteCount: 3, order: .little)
        case .uint24be: .unsigned(byteCount: 3, order: .big)
        case .uint32le: .unsigned(byteCount: 4, order: .little)
        case .uint32be: .unsigned(byteCount: 4, order: .big)
        case .uint64le: .unsigned(byteCount: 8, order: .little)
        case .uint64be: .unsigned(byteCount: 8, order: .big)
        case .sint8: .signed(byteCount: 1, order: .little)
        case .sint16le: .signed(byteCount: 2, order: .little)
        case .sint16be: .signed(byteCount: 2, order: .big)
        case .sint24le: .signed(byteCount: 3, order: .little)
        case .sint24be: .signed(byteCount: 3, order: .big)
        case .sint32le: .signed(byteCount: 4, order: .little)
        case .sint32be: .signed(byteCount: 4, order: .big)
        case .sint64le: .signed(byteCount: 8, order: .little)
        case .sint64be: .signed(byteCount: 8, order: .big)
        case .float32le: .binary32(order: .little)
        case .float32be: .binary32(order: .big)
        case .float64le: .binary64(order: .little)
        case .float64be: .binary64(order: .big)
        case .sfloat: .medical16
        case .float: .medical32
        case .utf8: .text
        case .hex: .hex
        }
    }
}
