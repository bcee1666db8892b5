/// Turns GATT characteristic values into ``Reading``s. Pure: no I/O, no clocks, no Foundation.
public enum ReadingsDecoder {
    /// Chooses how to decode a characteristic.
    ///
    /// Precedence, most specific first:
    /// 1. a configured `layout` (the operator knows this device, even if it misuses a SIG UUID);
    /// 2. a ``SIGCharacteristics`` entry for `uuid16`;
    /// 3. the 0x2904 `presentation` descriptor, when its format is decodable;
    /// 4. hex text named `fallbackName`.
    public static func decoding(
        for uuid16: UInt16?,
        presentation: PresentationFormat?,
        layout: Layout?,
        fallbackName: String
    ) -> CharacteristicDecoding {
        if let layout { return .layout(layout) }
        if let uuid16, SIGCharacteristics.entry(uuid16) != nil { return .sig(uuid16) }
        if let presentation, presentation.valueFormat != nil { return .presentation(presentation, name: fallbackName) }
        return .hex(name: fallbackName)
    }

    /// Decodes a value. Never throws and never traps: every failure is a reading with
    /// `value == nil` and a ``ReadingError``.
    ///
    /// Extra bytes after the last defined field are ignored (GSS lets later versions append
    /// fields); a payload shorter than a field is ``ReadingError/Code/payloadTooShort``.
    public static func decode(_ bytes: [UInt8], as decoding: CharacteristicDecoding) -> [Reading] {
        switch decoding {
        case .sig(let uuid16):
            guard let entry = SIGCharacteristics.entry(uuid16) else {
                return [
                    .failed(
                        "characteristic_\(HexText.number(UInt64(uuid16), digits: 4).dropFirst(2).lowercased())",
                        ReadingError(
                            .unsupportedFormat, "no SIG table entry for \(HexText.number(UInt64(uuid16), digits: 4))")
                    )
                ]
            }
            return entry.readings(from: bytes)
        case .presentation(let format, let name):
            return [format.reading(named: name, from: bytes)]
        case .layout(let layout):
            return layout.readings(from: bytes)
        case .hex(let name):
            return [Reading(name: name, value: .text(HexText.bytes(bytes)))]
        }
    }
}
