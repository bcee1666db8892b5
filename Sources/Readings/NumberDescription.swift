/// How one numeric value is laid out and what it means: format, scale, offset, unit, the raw
/// values the specification reserves, and the valid range. SIG table entries and configured
/// fields are both this data; one decoding function interprets it.
public struct NumberDescription: Sendable, Hashable {
    /// A raw value with a reserved meaning, compared against the raw bits before scaling.
    public struct Special: Sendable, Hashable {
        /// The raw bits, e.g. `0x8000` for a sint16 "value is not known".
        public var raw: UInt64
        /// The GSS wording, e.g. "value is not known".
        public var meaning: String
        /// Whether the raw value still stands for a number (GSS "value is 65534 or greater"): the
        /// reading then keeps the number and carries a ``ReadingError/Code/specialValue`` remark.
        public var keepsValue: Bool

        /// Creates a special.
        public init(raw: UInt64, meaning: String, keepsValue: Bool = false) {
            self.raw = raw
            self.meaning = meaning
            self.keepsValue = keepsValue
        }

        /// GSS "value is not known".
        public static func notKnown(_ raw: UInt64) -> Special {
            Special(raw: raw, meaning: "value is not known")
        }
    }

    /// The wire format; must be numeric.
    public var format: ValueFormat
    /// The factor applied to the raw value.
    public var scale: Scale
    /// Added after scaling.
    public var offset: Double
    /// The unit symbol of the result.
    public var unit: String?
    /// Raw values with reserved meanings.
    public var specials: [Special]
    /// The range the result must lie in; outside it the reading has no value and an
    /// ``ReadingError/Code/outOfRange`` error whose message keeps the number.
    public var valid: ValidRange?

    /// Creates a description.
    public init(
        format: ValueFormat,
        scale: Scale = .identity,
        offset: Double = 0,
        unit: String? = nil,
        specials: [Special] = [],
        valid: ValidRange? = nil
    ) {
        self.format = format
        self.scale = scale
        self.offset = offset
        self.unit = unit
        self.specials = specials
        self.valid = valid
    }
}

extension NumberDescription {
    /// Decodes the value at `offset` into a reading named `name`. Never throws: every failure
    /// becomes the reading's error.
    ///
    /// - Parameter extraDecimalExponent: a further power of ten (a 0x2904 exponent), folded into
    ///   the scale's so the result is rounded once.
    func reading(
        named name: String,
        from reader: ByteReader,
        at offset: Int,
        extraDecimalExponent: Int = 0
    ) -> Reading {
        do throws(ReadingError) {
            let bits = try format.readBits(from: reader, at: offset)
            return try reading(named: name, bits: bits, extraDecimalExponent: extraDecimalExponent)
        } catch {
            return .failed(name, unit: unit, error)
        }
    }

    /// Decodes raw bits already read (or cut out of a wider field, as Ruuvi packs two values in 16 bits): the
    /// specials, the scale, the valid range. A failure is thrown, for ``reading(named:from:at:extraDecimalExponent:)``
    /// and the advertisement decoders to turn into the reading's error.
    ///
    /// - Parameter rawOffset: added to the raw integer before the scale, exactly (Ruuvi's pressure is the raw
    ///   value + 50 000 Pa: 100 044 Pa in hPa is 1000.44, where scaling first and adding 500 after gives
    ///   1000.4400000000001). Specials are compared before it is added.
    func reading(
        named name: String, bits: UInt64, extraDecimalExponent: Int = 0, rawOffset: Int64 = 0
    ) throws(ReadingError) -> Reading {
        var remark: ReadingError?
        for special in specials where special.raw == bits {
            let error = ReadingError(
                .specialValue,
                "\(HexText.number(bits, digits: (format.byteCount ?? 1) * 2)): \(special.meaning)"
            )
            guard special.keepsValue else { return .failed(name, unit: unit, error) }
            remark = error
        }
        var raw = try format.number(fromBits: bits)
        if rawOffset != 0 {
            switch raw {
            case .signed(let integer): raw = .signed(integer &+ rawOffset)
            case .unsigned(let integer): raw = .signed(Int64(clamping: integer) &+ rawOffset)
            case .binary, .decimal: break
            }
        }
        let value = value(of: raw, extraDecimalExponent: extraDecimalExponent)
        guard let number = value.doubleValue, number.isFinite else {
            throw ReadingError(.outOfRange, "the scaled value is too large to represent")
        }
        if let valid, !valid.contains(number) {
            let unitText = unit.map { " \($0)" } ?? ""
            throw ReadingError(.outOfRange, "\(number)\(unitText) is outside the valid range \(valid)\(unitText)")
        }
        return Reading(name: name, value: value, unit: unit, error: remark)
    }

    /// The scaled value: an exact integer when no scale or offset applies, else a `Double`.
    func value(of raw: RawNumber, extraDecimalExponent: Int) -> Reading.Value {
        let unscaled = scale.isIdentity && offset == 0 && extraDecimalExponent == 0
        switch raw {
        case .signed(let integer):
            if unscaled { return .integer(integer) }
            return .number(scale.apply(to: Double(integer), extraDecimalExponent: extraDecimalExponent) + offset)
        case .unsigned(let integer):
            if unscaled { return .unsigned(integer) }
            return .number(scale.apply(to: Double(integer), extraDecimalExponent: extraDecimalExponent) + offset)
        case .binary(let number):
            return .number(scale.apply(to: number, extraDecimalExponent: extraDecimalExponent) + offset)
        case .decimal(let medical):
            let exponent = Int(medical.exponent) &+ extraDecimalExponent
            return .number(scale.apply(to: Double(medical.mantissa), extraDecimalExponent: exponent) + offset)
        }
    }
}
