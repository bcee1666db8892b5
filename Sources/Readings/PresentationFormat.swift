/// The Characteristic Presentation Format descriptor (UUID 0x2904, Core Specification Vol 3
/// Part G 3.3.3.5): how a characteristic without a SIG definition presents its value.
///
/// Seven bytes: format (Assigned Numbers "Format Types"), exponent (sint8, base 10), unit
/// (uint16, an Assigned Numbers unit UUID such as 0x272F °C), namespace (uint8, 0x01 =
/// Bluetooth SIG), description (uint16, namespace-defined).
public struct PresentationFormat: Sendable, Hashable {
    /// The format type code, e.g. 0x0E sint16.
    public var format: UInt8
    /// The base-10 exponent: value = raw × 10^exponent (integer formats only).
    public var exponent: Int8
    /// The unit UUID, e.g. 0x272F degree Celsius.
    public var unit: UInt16
    /// The namespace of ``description``; 0x01 is the Bluetooth SIG.
    public var namespace: UInt8
    /// A namespace-defined description, e.g. a position such as "first".
    public var description: UInt16

    /// Creates a presentation format from its fields.
    public init(
        format: UInt8, exponent: Int8 = 0, unit: UInt16 = 0x2700, namespace: UInt8 = 0x01, description: UInt16 = 0
    ) {
        self.format = format
        self.exponent = exponent
        self.unit = unit
        self.namespace = namespace
        self.description = description
    }

    /// The size of the descriptor's value.
    public static let descriptorByteCount = 7

    /// Parses the descriptor's value.
    /// - Throws: ``ReadingError/Code/payloadTooShort`` or ``ReadingError/Code/payloadTooLong``
    ///   unless there are exactly 7 bytes: a descriptor has a fixed size, so any other length
    ///   means we are reading something else.
    public init(descriptor bytes: [UInt8]) throws(ReadingError) {
        guard bytes.count >= Self.descriptorByteCount else {
            throw .payloadTooShort(needs: Self.descriptorByteCount, at: 0, has: bytes.count)
        }
        guard bytes.count == Self.descriptorByteCount else {
            throw ReadingError(
                .payloadTooLong,
                "a presentation format descriptor has \(Self.descriptorByteCount) bytes, got \(bytes.count)"
            )
        }
        let reader = ByteReader(bytes)
        format = bytes[0]
        exponent = Int8(bitPattern: bytes[1])
        unit = UInt16(truncatingIfNeeded: try reader.unsignedBits(at: 2, byteCount: 2, order: .little))
        namespace = bytes[4]
        description = UInt16(truncatingIfNeeded: try reader.unsignedBits(at: 5, byteCount: 2, order: .little))
    }

    /// The descriptor's 7 bytes (for simulators and tests).
    public var descriptorBytes: [UInt8] {
        [
            format, UInt8(bitPattern: exponent),
            UInt8(truncatingIfNeeded: unit), UInt8(truncatingIfNeeded: unit >> 8),
            namespace,
            UInt8(truncatingIfNeeded: description), UInt8(truncatingIfNeeded: description >> 8),
        ]
    }

    /// The format types of Assigned Numbers (Core Spec Vol 3 Part G 3.3.3.5.2 refers to them),
    /// by code: the name and the ``ValueFormat`` that decodes it, `nil` where this module cannot
    /// (sub-byte, 12-, 48- and 128-bit integers, duint16, UTF-16 and opaque structures).
    static let formatTypes: [UInt8: (name: String, format: ValueFormat?)] = [
        0x01: ("boolean", .uint8),
        0x02: ("2bit", nil),
        0x03: ("nibble", nil),
        0x04: ("uint8", .uint8),
        0x05: ("uint12", nil),
        0x06: ("uint16", .uint16le),
        0x07: ("uint24", .uint24le),
        0x08: ("uint32", .uint32le),
        0x09: ("uint48", nil),
        0x0A: ("uint64", .uint64le),
        0x0B: ("uint128", nil),
        0x0C: ("sint8", .sint8),
        0x0D: ("sint12", nil),
        0x0E: ("sint16", .sint16le),
        0x0F: ("sint24", .sint24le),
        0x10: ("sint32", .sint32le),
        0x11: ("sint48", nil),
        0x12: ("sint64", .sint64le),
        0x13: ("sint128", nil),
        0x14: ("float32", .float32le),
        0x15: ("float64", .float64le),
        0x16: ("SFLOAT", .sfloat),
        0x17: ("FLOAT", .float),
        0x18: ("duint16", nil),
        0x19: ("utf8s", .utf8),
        0x1A: ("utf16s", nil),
        0x1B: ("struct", nil),
    ]

    /// The Assigned Numbers name of ``format``, e.g. "sint16"; `nil` for unassigned codes.
    public var formatName: String? { Self.formatTypes[format]?.name }

    /// The ``ValueFormat`` that decodes ``format``; `nil` when unsupported or unassigned.
    public var valueFormat: ValueFormat? { Self.formatTypes[format]?.format }

    /// The symbol of ``unit`` (see ``unitSymbol(for:)``).
    public var unitSymbol: String? { Self.unitSymbol(for: unit) }

    /// Decodes a value presented by this descriptor into one reading named `name`.
    func reading(named name: String, from bytes: [UInt8]) -> Reading {
        guard let valueFormat else {
            let known = formatName.map { " (\($0))" } ?? ""
            return .failed(
                name,
                ReadingError(
                    .unsupportedFormat,
                    "presentation format \(HexText.number(UInt64(format), digits: 2))\(known) is not supported"
                ))
        }
        let reader = ByteReader(bytes)
        guard valueFormat.isNumeric else {
            do throws(ReadingError) {
                return Reading(name: name, value: .text(try valueFormat.readText(from: reader, at: 0)))
            } catch {
                return .failed(name, error)
            }
        }
        // The Core spec applies the exponent to integer formats; floats carry their own.
        let exponent = valueFormat.isInteger ? Int(exponent) : 0
        let number = NumberDescription(format: valueFormat, unit: unitSymbol)
        return number.reading(named: name, from: reader, at: 0, extraDecimalExponent: exponent)
    }
}
