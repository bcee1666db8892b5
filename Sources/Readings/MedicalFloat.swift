/// An IEEE-11073 decimal floating-point number: `mantissa × 10^exponent`.
///
/// Bluetooth health and environmental characteristics use two sizes: SFLOAT (16 bits, GSS
/// "medfloat16": 4-bit signed exponent above a 12-bit signed mantissa) and FLOAT (32 bits, GSS
/// "medfloat32": 8-bit signed exponent above a 24-bit signed mantissa), both little endian on the
/// wire. Some mantissas with exponent 0 are reserved specials (NaN, NRes, ±INFINITY, reserved);
/// they are reported as ``ReadingError/Code/specialValue`` errors, never as numbers.
public struct MedicalFloat: Sendable, Hashable {
    /// The signed mantissa (12 significant bits for SFLOAT, 24 for FLOAT).
    public var mantissa: Int32
    /// The signed base-10 exponent (4 bits for SFLOAT, 8 for FLOAT).
    public var exponent: Int8

    /// Creates a number from its parts; no range check (see ``sfloatBits`` and ``floatBits``).
    public init(mantissa: Int32, exponent: Int8) {
        self.mantissa = mantissa
        self.exponent = exponent
    }

    /// The value as the `Double` nearest to `mantissa × 10^exponent`.
    ///
    /// Negative exponents divide by an exact power of ten, so mantissa 3654 with exponent -2 is
    /// the `Double` nearest 36.54 (multiplying by 0.01 would add a rounding error).
    public var doubleValue: Double {
        PowerOfTen.scale(Double(mantissa), by: Int(exponent))
    }

    /// The SFLOAT specials, by raw value (exponent 0, reserved mantissas).
    static let sfloatSpecials: [(bits: UInt16, meaning: String)] = [
        (0x07FF, "NaN (not a number)"),
        (0x0800, "NRes (not at this resolution)"),
        (0x07FE, "+INFINITY"),
        (0x0802, "−INFINITY"),
        (0x0801, "reserved for future use"),
    ]

    /// The FLOAT specials, by raw value (exponent 0, reserved mantissas).
    static let floatSpecials: [(bits: UInt32, meaning: String)] = [
        (0x007F_FFFF, "NaN (not a number)"),
        (0x0080_0000, "NRes (not at this resolution)"),
        (0x007F_FFFE, "+INFINITY"),
        (0x0080_0002, "−INFINITY"),
        (0x0080_0001, "reserved for future use"),
    ]

    /// Decodes the 16 bits of an SFLOAT.
    /// - Throws: ``ReadingError/Code/specialValue`` naming the special (NaN, NRes, ±INFINITY, reserved).
    public init(sfloatBits bits: UInt16) throws(ReadingError) {
        for special in Self.sfloatSpecials where special.bits == bits {
            throw ReadingError(.specialValue, "\(HexText.number(UInt64(bits), digits: 4)): \(special.meaning)")
        }
        mantissa = Int32(truncatingIfNeeded: ByteReader.signExtend(UInt64(bits & 0x0FFF), bitWidth: 12))
        exponent = Int8(truncatingIfNeeded: ByteReader.signExtend(UInt64(bits >> 12), bitWidth: 4))
    }

    /// Decodes the 32 bits of a FLOAT.
    /// - Throws: ``ReadingError/Code/specialValue`` naming the special (NaN, NRes, ±INFINITY, reserved).
    public init(floatBits bits: UInt32) throws(ReadingError) {
        for special in Self.floatSpecials where special.bits == bits {
            throw ReadingError(.specialValue, "\(HexText.number(UInt64(bits), digits: 8)): \(special.meaning)")
        }
        mantissa = Int32(truncatingIfNeeded: ByteReader.signExtend(UInt64(bits & 0x00FF_FFFF), bitWidth: 24))
        exponent = Int8(truncatingIfNeeded: bits >> 24)
    }

    /// The SFLOAT encoding, or `nil` when the mantissa or exponent does not fit or the pair
    /// would collide with a special (mantissa ±2046…2048 with exponent 0 are reserved).
    public var sfloatBits: UInt16? {
        guard (-2048...2047).contains(mantissa), (-8...7).contains(exponent) else { return nil }
        let bits = UInt16(truncatingIfNeeded: exponent) << 12 | UInt16(truncatingIfNeeded: mantissa) & 0x0FFF
        if Self.sfloatSpecials.contains(where: { $0.bits == bits }) { return nil }
        return bits
    }

    /// The FLOAT encoding, or `nil` when the mantissa does not fit or the pair is a special.
    public var floatBits: UInt32? {
        guard (-0x80_0000...0x7F_FFFF).contains(mantissa) else { return nil }
        let bits = UInt32(truncatingIfNeeded: UInt8(bitPattern: exponent)) << 24
            | UInt32(truncatingIfNeeded: mantissa) & 0x00FF_FFFF
        if Self.floatSpecials.contains(where: { $0.bits == bits }) { return nil }
        return bits
    }

    /// The representation of `value` with the smallest exponent whose mantissa fits in
    /// `mantissaLimit` (so the most digits are kept), or `nil` when the value is not finite or too large.
    static func nearest(
        to value: Double,
        mantissaLimit: Int64,
        exponents: ClosedRange<Int>
    ) -> MedicalFloat? {
        guard value.isFinite else { return nil }
        for exponent in exponents {
            guard let scaled = PowerOfTen.scale(value, by: -exponent).roundedInt64,
                scaled.magnitude <= mantissaLimit.magnitude,
                let mantissa = Int32(exactly: scaled)
            else { continue }
            return MedicalFloat(mantissa: mantissa, exponent: Int8(truncatingIfNeeded: exponent))
        }
        return nil
    }
}
