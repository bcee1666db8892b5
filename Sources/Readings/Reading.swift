/// One named value a device reported, decoded from a GATT characteristic value.
///
/// A characteristic decodes to one or more readings (Heart Rate Measurement gives `heart_rate`,
/// `sensor_contact`, `rr_intervals`, …); names are unique within one characteristic.
/// Decoding never throws: a reading that could not be decoded keeps its name, has `value == nil`
/// and says why in `error`, so one bad field never hides the good ones next to it.
public struct Reading: Sendable, Hashable {
    /// A decoded value.
    public enum Value: Sendable, Hashable {
        /// A signed integer, unscaled (the format was signed and no scale or offset applies).
        case integer(Int64)
        /// An unsigned integer, unscaled (the format was unsigned and no scale or offset applies).
        case unsigned(UInt64)
        /// A number after scaling, or a floating-point format.
        case number(Double)
        /// Several numbers of the same kind, e.g. RR intervals.
        case numbers([Double])
        /// Text: strings, date-times, enumeration names (a button's `double_press`).
        case text(String)
        /// A two-state value: a binary sensor of an advertisement (door open, motion, leak), `true` in the state
        /// its format calls "on".
        case boolean(Bool)
    }

    /// The reading's name in snake_case, e.g. `temperature`, `battery`, `rr_intervals`.
    public var name: String
    /// The decoded value; `nil` when it could not be decoded (see ``error``).
    public var value: Value?
    /// The unit symbol, e.g. `°C`, `%`, `Pa`; `nil` for unitless values and text.
    public var unit: String?
    /// Why ``value`` is `nil`, or a remark on a value that is kept but qualified (a saturated
    /// special such as "65534 or greater", reserved bits that were ignored). `nil` when all is well.
    public var error: ReadingError?

    /// Creates a reading.
    public init(name: String, value: Value?, unit: String? = nil, error: ReadingError? = nil) {
        self.name = name
        self.value = value
        self.unit = unit
        self.error = error
    }

    /// A reading that failed to decode.
    public static func failed(_ name: String, unit: String? = nil, _ error: ReadingError) -> Reading {
        Reading(name: name, value: nil, unit: unit, error: error)
    }
}

extension Reading.Value {
    /// The value as a `Double` when it is a single number (integers converted), else `nil` (a boolean is not a
    /// number).
    public var doubleValue: Double? {
        switch self {
        case .integer(let value): Double(value)
        case .unsigned(let value): Double(value)
        case .number(let value): value
        case .numbers, .text, .boolean: nil
        }
    }
}
