/// The layout of a SIG characteristic with several fields, as data: an optional flags byte, the
/// reserved flag bits, and the fields in wire order, each present always or when a flag bit is set.
///
/// GSS compound characteristics (Heart Rate Measurement, Temperature Measurement, …) follow one
/// pattern: a flags field, then mandatory fields, then optional fields in a fixed order, each
/// present when its flag is set. This type describes that pattern; one interpreter decodes it.
public struct CompoundLayout: Sendable, Hashable {
    /// One field of a compound characteristic.
    public struct Field: Sendable, Hashable {
        /// What the field's bytes hold.
        public enum Content: Sendable, Hashable {
            /// One number.
            case number(NumberDescription)
            /// One number whose format, scale or unit depends on a flag bit (e.g. °C or °F).
            case numberByFlag(flag: UInt8, whenClear: NumberDescription, whenSet: NumberDescription)
            /// Numbers of one format repeated to the end of the payload (at least one).
            case repeatedNumbers(NumberDescription)
            /// GSS Date Time (7 bytes), decoded to text `YYYY-MM-DDTHH:MM:SS`.
            case dateTime
            /// A uint8 code with a name per code, decoded to the name; `specials` are codes with a
            /// reserved meaning ("not known"); any other code is reserved for future use.
            case enumeration(names: [UInt8: String], specials: [UInt8: String])
            /// Bits of the flags byte itself (no payload bytes), decoded to the name at their value.
            case flagBits(shift: UInt8, width: UInt8, names: [String])
            /// A uint8 bit field, decoded to the names of the set bits joined by commas (`none`
            /// when no bit is set); bits beyond `names` are reserved.
            case bitNames(names: [String])
        }

        /// The reading's name.
        public var name: String
        /// The flag bit that makes the field present; 0 when always present.
        public var presentWhen: UInt8
        /// What the field holds.
        public var content: Content

        /// Creates a field.
        public init(_ name: String, presentWhen: UInt8 = 0, _ content: Content) {
            self.name = name
            self.presentWhen = presentWhen
            self.content = content
        }

        /// The unit the reading carries for the given flags.
        func unit(flags: UInt8) -> String? {
            switch content {
            case .number(let number), .repeatedNumbers(let number): number.unit
            case .numberByFlag(let flag, let clear, let set): flags & flag == 0 ? clear.unit : set.unit
            case .dateTime, .enumeration, .flagBits, .bitNames: nil
            }
        }
    }

    /// Whether the payload starts with a uint8 flags field.
    public var hasFlags: Bool
    /// The flag bits GSS reserves for future use.
    public var reservedFlags: UInt8
    /// The fields after the flags, in wire order.
    public var fields: [Field]

    /// Creates a compound layout.
    public init(hasFlags: Bool, reservedFlags: UInt8 = 0, fields: [Field]) {
        self.hasFlags = hasFlags
        self.reservedFlags = reservedFlags
        self.fields = fields
    }

    /// The names of every reading this layout can produce, in order.
    public var readingNames: [String] {
        (hasFlags && reservedFlags != 0 ? ["flags"] : []) + fields.map(\.name)
    }
}
