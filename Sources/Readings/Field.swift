/// One value of a vendor characteristic, as written in the configuration: where it is, how it is
/// encoded, and how to turn the raw number into a reading.
///
/// ```swift
/// Field(name: "temperature", at: 2, format: .sint16le, scale: try Scale(parsing: "0.01"), unit: "°C")
/// ```
public struct Field: Sendable, Hashable {
    /// The reading's name (snake_case).
    public var name: String
    /// The byte offset of the value in the payload.
    public var at: Int
    /// The wire format.
    public var format: ValueFormat
    /// The factor applied to the raw number (numeric formats only).
    public var scale: Scale
    /// Added after scaling (numeric formats only), e.g. -40 for a sensor that reports °C + 40.
    public var offset: Double
    /// The unit symbol (numeric formats only).
    public var unit: String?
    /// The range the result must lie in (numeric formats only).
    public var valid: ValidRange?

    /// Creates a field.
    public init(
        name: String,
        at: Int,
        format: ValueFormat,
        scale: Scale = .identity,
        offset: Double = 0,
        unit: String? = nil,
        valid: ValidRange? = nil
    ) {
        self.name = name
        self.at = at
        self.format = format
        self.scale = scale
        self.offset = offset
        self.unit = unit
        self.valid = valid
    }

    /// The field's number rule (meaningful for numeric formats).
    var numberDescription: NumberDescription {
        NumberDescription(format: format, scale: scale, offset: offset, unit: unit, valid: valid)
    }

    /// Decodes this field from `reader`. Never throws.
    func reading(from reader: ByteReader) -> Reading {
        guard format.isNumeric else {
            do throws(ReadingError) {
                return Reading(name: name, value: .text(try format.readText(from: reader, at: at)))
            } catch {
                return .failed(name, error)
            }
        }
        return numberDescription.reading(named: name, from: reader, at: at)
    }
}

extension Field {
    /// Every problem with this field on its own; empty when it is usable.
    ///
    /// Reports: a negative position, a unit / scale / offset / valid range on a text or hex field
    /// (they would be silently ignored), a valid range whose minimum exceeds its maximum or has a
    /// NaN bound, a scale or offset that is not finite, and an empty name.
    public func validate() -> [ReadingError] {
        var errors: [ReadingError] = []
        func problem(_ message: String) {
            errors.append(ReadingError(.invalidLayout, "field \"\(name)\": \(message)"))
        }
        if name.isEmpty { problem("the name is empty") }
        if at < 0 { problem("offset \(at) is negative") }
        if format.isNumeric {
            if !scale.multiplier.isFinite || scale.multiplier == 0 {
                problem("scale multiplier \(scale.multiplier) is not a finite non-zero number")
            }
            if !offset.isFinite { problem("offset \(offset) is not finite") }
            if let valid, !valid.isWellFormed {
                problem("valid range minimum \(valid.minimum) is not at most maximum \(valid.maximum)")
            }
        } else {
            if unit != nil { problem("a unit makes no sense on a \(format.rawValue) field") }
            if !scale.isIdentity { problem("a scale makes no sense on a \(format.rawValue) field") }
            if offset != 0 { problem("an offset makes no sense on a \(format.rawValue) field") }
            if valid != nil { problem("a valid range makes no sense on a \(format.rawValue) field") }
        }
        return errors
    }
}
