/// How one characteristic's value is to be decoded; chosen once per characteristic with
/// ``ReadingsDecoder/decoding(for:presentation:layout:fallbackName:)``.
public enum CharacteristicDecoding: Sendable, Hashable {
    /// A SIG-defined characteristic from ``SIGCharacteristics``, by 16-bit UUID.
    case sig(UInt16)
    /// A value described by its 0x2904 Characteristic Presentation Format descriptor.
    case presentation(PresentationFormat, name: String)
    /// A vendor value with a configured layout.
    case layout(Layout)
    /// Nothing known: the bytes as hex text.
    case hex(name: String)
}
