import Basics

/// The 16-byte AES-128 key of one device: BTHome's "encryption key", Xiaomi's "bind key".
///
/// Written in configurations as 32 hexadecimal digits (`231d39c1d7cc1ab1aee224cd096db932`), the way BTHome devices,
/// pvvx's configurator and Xiaomi's cloud tools show it. Its ``description`` never shows the key, so a key that
/// ends up in a log or an error message is not leaked.
public struct AdvertisementKey: Sendable, Hashable, CustomStringConvertible {
    /// The key's 16 bytes.
    public let bytes: [UInt8]

    /// A key of exactly 16 bytes.
    /// - Throws: ``AdvertisementError/Code/invalidKey`` for another count.
    public init(bytes: [UInt8]) throws(AdvertisementError) {
        guard bytes.count == 16 else {
            throw AdvertisementError(.invalidKey, "a key has 16 bytes, this one has \(bytes.count)")
        }
        self.bytes = bytes
    }

    /// Parses 32 hexadecimal digits, either case.
    /// - Throws: ``AdvertisementError/Code/invalidKey``, saying how many characters there were (never
    ///   the characters themselves).
    public init(hex text: String) throws(AdvertisementError) {
        guard text.utf8.count == 32, let bytes = Hex.bytes(text) else {
            let count = text.count
            let characters = count == 1 ? "character" : "characters"
            throw AdvertisementError(
                .invalidKey,
                "a key is 32 hexadecimal digits (16 bytes), this one has \(count) \(characters)"
                    + (text.utf8.count == 32 ? " that are not all hexadecimal digits" : ""))
        }
        try self.init(bytes: bytes)
    }

    /// `key(16 bytes)`: never the bytes.
    public var description: String { "key(16 bytes)" }
}
