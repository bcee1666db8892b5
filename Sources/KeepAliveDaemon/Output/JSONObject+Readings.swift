import Basics
import Readings

extension JSONObject {
    /// A number as JSON writes it: Swift's shortest round-trip form (`21.54`, `1e-05`); JSON has no NaN or
    /// infinity, so those (which the decoder reports as specials, never as values) would be `null`.
    mutating func number(_ name: String, _ value: Double) {
        rawValue(name, value.isFinite ? Self.numberText(value) : "null")
    }

    /// `readings`: one member per reading, `{"value": 21.54, "unit": "°C"}`; a reading that could not be
    /// decoded is `{"value": null, "unit": "°C", "error": "payloadTooShort: …"}`. Members in the readings' order.
    mutating func readings(_ name: String, _ readings: [Reading]) {
        object(name) { object in
            for reading in readings {
                object.object(reading.name) { member in
                    member.readingValue(reading.value)
                    if let unit = reading.unit { member.string("unit", unit) }
                    if let error = reading.error { member.string("error", error.description) }
                }
            }
        }
    }

    private mutating func readingValue(_ value: Reading.Value?) {
        switch value {
        case nil: null("value")
        case .integer(let signed): integer("value", signed)
        case .unsigned(let unsigned): integer("value", unsigned)
        case .number(let double): number("value", double)
        case .numbers(let numbers):
            rawValue(
                "value", "[" + numbers.map { $0.isFinite ? Self.numberText($0) : "null" }.joined(separator: ",") + "]")
        case .text(let text): string("value", text)
        case .boolean(let flag): bool("value", flag)
        }
    }

    /// Whole numbers without a fraction (`51`, not `51.0`); others in Swift's shortest round-trip form: the
    /// readings' own text form of a number.
    static func numberText(_ value: Double) -> String {
        Reading.Value.number(value).description
    }
}
