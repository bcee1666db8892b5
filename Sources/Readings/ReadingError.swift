/// Why a reading, a layout or a configuration value could not be decoded or accepted.
///
/// Messages are written for a person reading a log: they name the byte counts
/// ("needs 2 bytes at offset 0, payload has 1"), the special value ("0x8000: value is not known")
/// or the range, so nothing decoded is lost when a value is refused.
public struct ReadingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong. Extensible: other modules may define more codes.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's stable spelling, used in logs and published error fields.
        public let rawValue: String

        /// Creates a code; two codes are equal when their raw values are.
        public init(_ rawValue: String) {
            self.rawValue = rawValue
        }

        public var description: String { rawValue }

        /// The payload ends before a field the format or the flags require.
        public static let payloadTooShort = Code("payloadTooShort")
        /// The payload is longer than a fixed-size structure allows (descriptors only: characteristic
        /// values may be extended by later specifications, so their extra bytes are ignored).
        public static let payloadTooLong = Code("payloadTooLong")
        /// The raw value is one the specification reserves with a meaning ("value is not known", NaN, …).
        public static let specialValue = Code("specialValue")
        /// A flags field has bits set that the specification reserves for future use.
        public static let reservedFlag = Code("reservedFlag")
        /// An enumerated field holds a code the specification reserves for future use.
        public static let reservedValue = Code("reservedValue")
        /// The decoded number lies outside the valid range; the message keeps the number.
        public static let outOfRange = Code("outOfRange")
        /// Bytes declared as text are not valid UTF-8.
        public static let invalidText = Code("invalidText")
        /// The format cannot be decoded here (an unknown presentation format code, an unknown UUID).
        public static let unsupportedFormat = Code("unsupportedFormat")
        /// A format name in the configuration is not one of ``ValueFormat``'s spellings.
        public static let unknownFormatName = Code("unknownFormatName")
        /// A scale in the configuration is not a number.
        public static let invalidScale = Code("invalidScale")
        /// A configured field or layout is inconsistent (negative position, duplicate name, …).
        public static let invalidLayout = Code("invalidLayout")
        /// A value cannot be encoded in the requested format (out of the format's range, not a number).
        public static let notEncodable = Code("notEncodable")
    }

    /// What went wrong.
    public var code: Code
    /// The human explanation, with the numbers involved.
    public var message: String

    /// Creates an error.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}

extension ReadingError {
    /// "needs 2 bytes at offset 0, payload has 1".
    static func payloadTooShort(needs count: Int, at offset: Int, has available: Int) -> ReadingError {
        ReadingError(
            .payloadTooShort,
            "needs \(count) \(count == 1 ? "byte" : "bytes") at offset \(offset), payload has \(available)"
        )
    }
}
