/// One value inside an advertisement, as data: where it is in its object and how it reads. The BTHome, MiBeacon,
/// pvvx, ATC1441 and Ruuvi tables are lists of these, the way ``SIGCharacteristics`` is a list of
/// ``NumberDescription``s; one function turns any of them into a ``Reading``.
struct AdvertisedField: Sendable {
    /// How the bytes read.
    enum Kind: Sendable {
        /// A number (format, scale, unit, the raw values that mean "not available").
        ///
        /// - `rawOffset` is added to the raw integer before the scale, exactly (Ruuvi's pressure: raw + 50 000 Pa).
        /// - `bits`, when set, cuts `width` bits starting at bit `shift` out of the field first (Ruuvi packs the
        ///   battery voltage and the transmit power in one 16-bit field); specials compare against the cut bits.
        case number(NumberDescription, rawOffset: Int64 = 0, bits: BitRange? = nil)
        /// An IEEE-754 binary32 given as the decimal it was written from (`26.1`, not the float's exact
        /// `26.100000381469727`): Xiaomi's newer objects send floats that stand for one or two decimals.
        case decimalFloat32(unit: String?)
        /// One byte, 0 false and 1 true; any other value is a ``ReadingError/Code/reservedValue``.
        case boolean
        /// One bit of a byte, set is true.
        case flag(bit: Int)
        /// One byte naming a state or an event; a code without a name is a ``ReadingError/Code/reservedValue``.
        case enumeration([UInt8: String])
        /// No bytes: the object's id says it (MiBeacon 0x000F "someone is moving" is motion by being sent).
        case constant(Reading.Value)
        /// An unsigned 32-bit count of seconds since 1970-01-01 UTC, as `2023-05-14T19:41:17Z`.
        case timestamp
        /// A version number, `components` bytes, least significant component first: `00 01 06` is `6.1.0`.
        case version(components: Int)
    }

    /// Bits cut out of a wider field.
    struct BitRange: Sendable, Hashable {
        /// The lowest bit.
        var shift: Int
        /// How many bits.
        var width: Int
    }

    /// The reading's name.
    var name: String
    /// The offset from the start of the object's data.
    var offset: Int
    /// How the bytes read.
    var kind: Kind

    init(_ name: String, at offset: Int = 0, _ kind: Kind) {
        self.name = name
        self.offset = offset
        self.kind = kind
    }

    /// A number field: `format` scaled by `scale` in `unit`, with "not available" raw values `notAvailable`.
    static func number(
        _ name: String, at offset: Int = 0, _ format: ValueFormat, scale: Scale = .identity, unit: String?,
        notAvailable: [UInt64] = [], rawOffset: Int64 = 0, bits: BitRange? = nil
    ) -> AdvertisedField {
        AdvertisedField(
            name, at: offset,
            .number(
                NumberDescription(
                    format: format, scale: scale, unit: unit,
                    specials: notAvailable.map { NumberDescription.Special(raw: $0, meaning: "not available") }),
                rawOffset: rawOffset, bits: bits))
    }

    /// The bytes the field takes, counted from the object's start (its offset included).
    var end: Int {
        switch kind {
        case .number(let number, _, _): offset &+ (number.format.byteCount ?? 0)
        case .decimalFloat32, .timestamp: offset &+ 4
        case .boolean, .flag, .enumeration: offset &+ 1
        case .constant: offset
        case .version(let components): offset &+ components
        }
    }

    /// The reading of the field of the object whose data starts at `base` in `reader`. Never throws: a problem is
    /// the reading's error.
    func reading(from reader: ByteReader, base: Int) -> Reading {
        let at = base &+ offset
        do throws(ReadingError) {
            switch kind {
            case .number(let number, let rawOffset, let bits):
                var raw = try number.format.readBits(from: reader, at: at)
                if let bits {
                    raw = raw >> UInt64(bits.shift) & (UInt64(1) << UInt64(bits.width) &- 1)
                }
                return try number.reading(named: name, bits: raw, rawOffset: rawOffset)
            case .decimalFloat32(let unit):
                let bits = UInt32(truncatingIfNeeded: try reader.unsignedBits(at: at, byteCount: 4, order: .little))
                let float = Float(bitPattern: bits)
                guard float.isFinite else {
                    throw ReadingError(.specialValue, "\(HexText.number(UInt64(bits), digits: 8)): not a finite number")
                }
                // The shortest decimal that reads back as this float, then the Double nearest to that decimal.
                return Reading(name: name, value: .number(Double(float.description) ?? Double(float)), unit: unit)
            case .boolean:
                let byte = try reader.byte(at: at)
                guard byte <= 1 else {
                    throw ReadingError(.reservedValue, "\(HexText.number(UInt64(byte), digits: 2)): neither 0 nor 1")
                }
                return Reading(name: name, value: .boolean(byte == 1))
            case .flag(let bit):
                return Reading(name: name, value: .boolean(try reader.byte(at: at) >> UInt8(bit) & 1 == 1))
            case .enumeration(let names):
                let byte = try reader.byte(at: at)
                guard let text = names[byte] else {
                    throw ReadingError(.reservedValue, "\(HexText.number(UInt64(byte), digits: 2)) has no meaning")
                }
                return Reading(name: name, value: .text(text))
            case .constant(let value):
                return Reading(name: name, value: value)
            case .timestamp:
                let seconds = try reader.unsignedBits(at: at, byteCount: 4, order: .little)
                return Reading(name: name, value: .text(Self.utcText(secondsSince1970: Int64(seconds))))
            case .version(let components):
                try reader.require(components, at: at)
                var text = ""
                var index = components
                while index > 0 {
                    index &-= 1
                    text += String(try reader.byte(at: at &+ index))
                    if index > 0 { text += "." }
                }
                return Reading(name: name, value: .text(text))
            }
        } catch {
            return .failed(name, unit: unit, error)
        }
    }

    /// The field's unit, for a reading that failed.
    var unit: String? {
        switch kind {
        case .number(let number, _, _): number.unit
        case .decimalFloat32(let unit): unit
        default: nil
        }
    }

    /// `2023-05-14T19:41:17Z`: days to a civil date by Howard Hinnant's `civil_from_days` (public domain
    /// arithmetic, exact for every 32-bit count of seconds), since the module does not import Foundation.
    static func utcText(secondsSince1970 seconds: Int64) -> String {
        let days = seconds / 86_400
        let secondOfDay = Int(seconds % 86_400)
        let shifted = days + 719_468
        let era = shifted / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = Int(dayOfYear - (153 * monthIndex + 2) / 5 + 1)
        let month = Int(monthIndex < 10 ? monthIndex + 3 : monthIndex - 9)
        let year = Int(yearOfEra + era * 400 + (month <= 2 ? 1 : 0))
        let pad = DateTimeText.padded
        let time = "\(pad(secondOfDay / 3_600, 2)):\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2))"
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(time)Z"
    }
}

/// Readings of one advertisement, named uniquely.
enum ReadingNames {
    /// Numbers every name that occurs more than once, in order (`temperature_1`, `temperature_2`), and leaves the
    /// others as they are, as Home Assistant's BTHome integration names several measurements of one kind.
    static func numberRepeated(_ readings: inout [Reading]) {
        guard readings.count > 1 else { return }
        var repeated = false
        outer: for index in readings.indices {
            for other in readings.indices where other > index && readings[other].name == readings[index].name {
                repeated = true
                break outer
            }
        }
        guard repeated else { return }
        var counts: [String: Int] = [:]
        for reading in readings { counts[reading.name, default: 0] += 1 }
        var seen: [String: Int] = [:]
        for index in readings.indices {
            let name = readings[index].name
            guard let count = counts[name], count > 1 else { continue }
            let number = seen[name, default: 0] + 1
            seen[name] = number
            readings[index].name = "\(name)_\(number)"
        }
    }
}
