/// A list of ``AdvertisedField``s made ready to read fast: the tables stay lists of fields (the definition, and the
/// reference reading), and each field also gets a ``CompiledField``, whose common cases read with no copying of
/// the field's description and no intermediate values. Anything else (a value that is "not available", bytes
/// missing, a kind without a fast form) is read by the field itself, so the result is the same either way; the
/// tests hold the two to that over random bytes.
struct FieldList: Sendable {
    /// The fields, in order.
    let fields: [AdvertisedField]
    /// ``fields``, compiled, in the same order.
    let compiled: [CompiledField]

    init(_ fields: [AdvertisedField]) {
        self.fields = fields
        self.compiled = fields.map(CompiledField.init)
    }

    var count: Int { fields.count }

    /// Appends the readings of the fields `range` (all of them by default) of the object whose data starts at
    /// `base` in `bytes`.
    func appendReadings(
        from bytes: [UInt8], base: Int, to readings: inout [Reading], range: Range<Int>? = nil
    ) {
        let range = range ?? 0..<compiled.count
        compiled.withUnsafeBufferPointer { compiled in
            bytes.withUnsafeBufferPointer { data in
                for index in range {
                    if let reading = compiled[index].fastReading(from: data, base: base) {
                        readings.append(reading)
                    } else {
                        readings.append(fields[index].reading(from: ByteReader(bytes), base: base))
                    }
                }
            }
        }
    }
}

/// The fast form of one ``AdvertisedField``: plain integers (scaled or not, cut from wider fields, with one
/// "not available" value), booleans and flags, as plain values. ``fastReading(from:base:)`` returns `nil` where
/// the field itself must read (see ``FieldList``).
struct CompiledField: Sendable {
    enum Operation: UInt8, Sendable {
        /// An unsigned or signed integer of `byteCount` bytes.
        case integer
        /// One byte, 0 or 1.
        case boolean
        /// One bit of a byte.
        case flag
        /// Read by the field itself.
        case general
    }

    var name: String
    var unit: String?
    var offset: Int
    var operation: Operation
    var byteCount: Int = 0
    var isSigned = false
    var isBigEndian = false
    /// Bits cut out of the field: `raw >> shift & mask` (all ones and 0 when not cut).
    var shift: UInt64 = 0
    var mask: UInt64 = ~0
    /// The one raw value with a special meaning, read by the field itself.
    var special: UInt64?
    var rawOffset: Int64 = 0
    var scale = Scale.identity
    /// The description's offset, added after the scale.
    var numberOffset: Double = 0
    /// No scale and no offset: the value stays an exact integer.
    var isUnscaled = true

    init(_ field: AdvertisedField) {
        name = field.name
        unit = field.unit
        offset = field.offset
        operation = .general
        switch field.kind {
        case .number(let number, let rawOffset, let bits):
            let integer: (count: Int, signed: Bool, order: ByteReader.ByteOrder)?
            switch number.format.representation {
            case .unsigned(let count, let order): integer = (count, false, order)
            case .signed(let count, let order): integer = (count, true, order)
            default: integer = nil
            }
            guard let integer, (1...8).contains(integer.count), number.valid == nil, number.specials.count <= 1,
                number.specials.allSatisfy({ !$0.keepsValue })
            else { return }
            if let bits {
                guard (0..<64).contains(bits.shift), (1..<64).contains(bits.width) else { return }
                shift = UInt64(bits.shift)
                mask = UInt64(1) << UInt64(bits.width) &- 1
            }
            operation = .integer
            byteCount = integer.count
            isSigned = integer.signed
            isBigEndian = integer.order == .big
            special = number.specials.first?.raw
            self.rawOffset = rawOffset
            scale = number.scale
            numberOffset = number.offset
            isUnscaled = number.scale.isIdentity && number.offset == 0
        case .boolean:
            operation = .boolean
        case .flag(let bit):
            guard (0..<8).contains(bit) else { return }
            operation = .flag
            shift = UInt64(bit)
        default:
            break
        }
    }

    /// The reading, or `nil` when the field must read itself: what ``AdvertisedField/reading(from:base:)`` gives
    /// for the same bytes whenever it is not `nil`.
    @inline(__always)
    func fastReading(from data: UnsafeBufferPointer<UInt8>, base: Int) -> Reading? {
        let at = base &+ offset
        switch operation {
        case .integer:
            guard at >= 0, at <= data.count, byteCount <= data.count &- at else { return nil }
            var raw: UInt64 = 0
            if isBigEndian {
                for index in at..<(at &+ byteCount) { raw = raw << 8 | UInt64(data[index]) }
            } else {
                var index = at &+ byteCount
                while index > at {
                    index &-= 1
                    raw = raw << 8 | UInt64(data[index])
                }
            }
            raw = raw >> shift & mask
            if let special, special == raw { return nil }
            let value: Reading.Value
            if isSigned {
                var integer = ByteReader.signExtend(raw, bitWidth: byteCount &* 8)
                if rawOffset != 0 { integer = integer &+ rawOffset }
                value =
                    isUnscaled
                    ? .integer(integer)
                    : .number(scale.apply(to: Double(integer), extraDecimalExponent: 0) + numberOffset)
            } else if rawOffset != 0 {
                let integer = Int64(clamping: raw) &+ rawOffset
                value =
                    isUnscaled
                    ? .integer(integer)
                    : .number(scale.apply(to: Double(integer), extraDecimalExponent: 0) + numberOffset)
            } else {
                value =
                    isUnscaled
                    ? .unsigned(raw)
                    : .number(scale.apply(to: Double(raw), extraDecimalExponent: 0) + numberOffset)
            }
            if case .number(let number) = value, !number.isFinite { return nil }
            return Reading(name: name, value: value, unit: unit)
        case .boolean:
            guard at >= 0, at < data.count, data[at] <= 1 else { return nil }
            return Reading(name: name, value: .boolean(data[at] == 1))
        case .flag:
            guard at >= 0, at < data.count else { return nil }
            return Reading(name: name, value: .boolean(data[at] >> shift & 1 == 1))
        case .general:
            return nil
        }
    }
}
