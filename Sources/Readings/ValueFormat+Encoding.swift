import Basics

extension ValueFormat {
    /// Encodes a value in this format: the inverse of decoding, for simulators and tests.
    ///
    /// Integers must fit the format exactly; numbers given to integer formats must be whole and
    /// in range; numbers given to SFLOAT/FLOAT are represented with the smallest exponent that
    /// keeps the mantissa in range (so the most digits survive); text goes to `utf8`, and `hex`
    /// accepts hexadecimal text.
    /// - Throws: ``ReadingError/Code/notEncodable`` naming the value and the format.
    public func encode(_ value: Reading.Value) throws(ReadingError) -> [UInt8] {
        func refuse(_ why: String) -> ReadingError {
            ReadingError(.notEncodable, "\(value) cannot be encoded as \(rawValue): \(why)")
        }
        switch (representation, value) {
        case (.unsigned(let count, let order), .unsigned(let integer)):
            guard count == 8 || integer >> UInt64(count &* 8) == 0 else { throw refuse("out of range") }
            return Self.bytes(integer, count: count, order: order)
        case (.unsigned(let count, let order), .integer(let integer)):
            guard let unsigned = UInt64(exactly: integer) else { throw refuse("negative") }
            guard count == 8 || unsigned >> UInt64(count &* 8) == 0 else { throw refuse("out of range") }
            return Self.bytes(unsigned, count: count, order: order)
        case (.signed(let count, let order), .integer(let integer)):
            guard ByteReader.signExtend(UInt64(bitPattern: integer), bitWidth: count &* 8) == integer else {
                throw refuse("out of range")
            }
            return Self.bytes(UInt64(bitPattern: integer), count: count, order: order)
        case (.signed, .unsigned(let integer)):
            guard let signed = Int64(exactly: integer) else { throw refuse("out of range") }
            return try encode(.integer(signed))
        case (.unsigned, .number(let number)), (.signed, .number(let number)):
            if let integer = number.exactInt64 { return try encode(.integer(integer)) }
            if let integer = number.exactUInt64 { return try encode(.unsigned(integer)) }
            throw refuse("not a whole number in range")
        case (.binary32(let order), _), (.binary64(let order), _):
            guard let number = value.doubleValue else { throw refuse("not a number") }
            if case .binary32 = representation {
                return Self.bytes(UInt64(Float(number).bitPattern), count: 4, order: order)
            }
            return Self.bytes(number.bitPattern, count: 8, order: order)
        case (.medical16, _):
            guard let number = value.doubleValue,
                let medical = MedicalFloat.nearest(to: number, mantissaLimit: 2045, exponents: -8...7),
                let bits = medical.sfloatBits
            else { throw refuse("not representable as SFLOAT") }
            return Self.bytes(UInt64(bits), count: 2, order: .little)
        case (.medical32, _):
            guard let number = value.doubleValue,
                let medical = MedicalFloat.nearest(to: number, mantissaLimit: 0x7F_FFFD, exponents: -128...127),
                let bits = medical.floatBits
            else { throw refuse("not representable as FLOAT") }
            return Self.bytes(UInt64(bits), count: 4, order: .little)
        case (.text, .text(let text)):
            return Array(text.utf8)
        case (.hex, .text(let text)):
            guard let bytes = Basics.Hex.bytes(text) else { throw refuse("not hexadecimal") }
            return bytes
        default:
            throw refuse("wrong kind of value")
        }
    }

    private static func bytes(_ value: UInt64, count: Int, order: ByteReader.ByteOrder) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: count)
        for index in 0..<count {
            let byte = UInt8(truncatingIfNeeded: value >> UInt64(index &* 8))
            result[order == .little ? index : count &- 1 &- index] = byte
        }
        return result
    }

}
