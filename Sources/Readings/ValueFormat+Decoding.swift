/// A number as read from the payload, before any scale: kept in its own kind so that unscaled
/// integers stay exact and IEEE-11073 numbers keep their decimal exponent until the one final division.
enum RawNumber: Sendable, Hashable {
    case signed(Int64)
    case unsigned(UInt64)
    case binary(Double)
    case decimal(MedicalFloat)
}

extension ValueFormat {
    /// Reads the raw bits of a numeric format (the value as an unsigned integer of its width),
    /// which is what GSS special values such as `0x8000` are compared against.
    func readBits(from reader: ByteReader, at offset: Int) throws(ReadingError) -> UInt64 {
        switch representation {
        case .unsigned(let count, let order), .signed(let count, let order):
            return try reader.unsignedBits(at: offset, byteCount: count, order: order)
        case .binary32(let order):
            return try reader.unsignedBits(at: offset, byteCount: 4, order: order)
        case .binary64(let order):
            return try reader.unsignedBits(at: offset, byteCount: 8, order: order)
        case .medical16:
            return try reader.unsignedBits(at: offset, byteCount: 2, order: .little)
        case .medical32:
            return try reader.unsignedBits(at: offset, byteCount: 4, order: .little)
        case .text, .hex:
            throw ReadingError(.unsupportedFormat, "\(rawValue) is not a numeric format")
        }
    }

    /// Interprets raw bits read by ``readBits(from:at:)``.
    /// - Throws: ``ReadingError/Code/specialValue`` for IEEE-11073 specials and IEEE-754 NaN/infinities.
    func number(fromBits bits: UInt64) throws(ReadingError) -> RawNumber {
        switch representation {
        case .unsigned:
            return .unsigned(bits)
        case .signed(let count, _):
            return .signed(ByteReader.signExtend(bits, bitWidth: count &* 8))
        case .binary32:
            return try Self.checkedBinary(
                Double(Float(bitPattern: UInt32(truncatingIfNeeded: bits))), bits: bits, digits: 8)
        case .binary64:
            return try Self.checkedBinary(Double(bitPattern: bits), bits: bits, digits: 16)
        case .medical16:
            return .decimal(try MedicalFloat(sfloatBits: UInt16(truncatingIfNeeded: bits)))
        case .medical32:
            return .decimal(try MedicalFloat(floatBits: UInt32(truncatingIfNeeded: bits)))
        case .text, .hex:
            throw ReadingError(.unsupportedFormat, "\(rawValue) is not a numeric format")
        }
    }

    /// Reads a numeric value at `offset`.
    func readNumber(from reader: ByteReader, at offset: Int) throws(ReadingError) -> RawNumber {
        try number(fromBits: readBits(from: reader, at: offset))
    }

    /// Reads the text formats: UTF-8 (trailing NULs trimmed, because many devices pad fixed-size
    /// buffers) or hex, from `offset` to the end of the payload.
    func readText(from reader: ByteReader, at offset: Int) throws(ReadingError) -> String {
        let rest = try reader.rest(from: offset)
        switch representation {
        case .hex:
            return HexText.bytes(rest)
        case .text:
            var end = rest.endIndex
            while end > rest.startIndex, rest[end &- 1] == 0 { end &-= 1 }
            let trimmed = rest[rest.startIndex..<end]
            guard let text = String(validating: trimmed, as: UTF8.self) else {
                throw ReadingError(.invalidText, "\(trimmed.count) bytes at offset \(offset) are not valid UTF-8")
            }
            return text
        default:
            throw ReadingError(.unsupportedFormat, "\(rawValue) is not a text format")
        }
    }

    private static func checkedBinary(_ value: Double, bits: UInt64, digits: Int) throws(ReadingError) -> RawNumber {
        if value.isNaN {
            throw ReadingError(.specialValue, "\(HexText.number(bits, digits: digits)): NaN (not a number)")
        }
        if value.isInfinite {
            let sign = value > 0 ? "+INFINITY" : "−INFINITY"
            throw ReadingError(.specialValue, "\(HexText.number(bits, digits: digits)): \(sign)")
        }
        return .binary(value)
    }
}
