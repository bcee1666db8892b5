extension Reading: CustomStringConvertible {
    /// `temperature 21.54 °C`, `battery 51 %`, `firmware 3.2.1`, `rr_intervals 0.83, 0.84 s`; a reading that
    /// could not be decoded says why: `temperature ? (payloadTooShort: needs 2 bytes at offset 0, payload has 1)`.
    /// The one text form of a reading for people (the CLI, the demo, the examples).
    public var description: String {
        guard let value else { return "\(name) ? (\(error?.description ?? "no value"))" }
        var text = "\(name) \(value)"
        if let unit { text += " \(unit)" }
        if let error { text += " (\(error.description))" }
        return text
    }
}

extension Reading.Value: CustomStringConvertible {
    /// The value without its unit: integers as written, numbers in their shortest exact form without a
    /// trailing `.0`, several numbers separated by commas, text as it is, booleans as `true` and `false`.
    public var description: String {
        switch self {
        case .integer(let value): String(value)
        case .unsigned(let value): String(value)
        case .number(let value): Self.text(value)
        case .numbers(let values): values.map(Self.text).joined(separator: ", ")
        case .text(let value): value
        case .boolean(let value): value ? "true" : "false"
        }
    }

    private static func text(_ value: Double) -> String {
        if abs(value) < 1e15, let whole = value.exactInt64 { return String(whole) }
        return value.description
    }
}
