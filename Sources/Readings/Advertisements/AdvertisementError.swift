/// Why an advertisement was not decoded, or was refused.
///
/// Like ``ReadingError``, written for a person reading a log: the message names the format, the device's address
/// and where in the bytes the problem is ("BTHome from 54:48:E6:8F:80:A5: object 0xFE at offset 3 is not a BTHome
/// object"). Problems with one value inside an otherwise good advertisement are not errors of this kind: they are
/// readings with `value == nil` and a ``ReadingError``, next to the good ones.
public struct AdvertisementError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong. Extensible: other modules may define more codes.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's stable spelling, used in logs and published error fields.
        public let rawValue: String

        /// Creates a code; two codes are equal when their raw values are.
        public init(_ rawValue: String) {
            self.rawValue = rawValue
        }

        public var description: String { rawValue }

        /// The bytes end before a field the format requires (a header, an object's declared length, a tag).
        public static let truncated = Code("truncated")
        /// The bytes are not in a format this module decodes (another length, a mesh MiBeacon, another Ruuvi
        /// format, a service UUID or company identifier no decoder claims).
        public static let unsupportedFormat = Code("unsupportedFormat")
        /// The format's version field names a version this module does not decode (BTHome other than 2, MiBeacon
        /// other than 2 to 5).
        public static let unsupportedVersion = Code("unsupportedVersion")
        /// An object id the format's table does not have, before anything could be decoded (after one, the
        /// readings before it are kept: see ``AdvertisementPayload/issues``).
        public static let unknownObject = Code("unknownObject")
        /// The authentication tag did not verify: the key is wrong, or the bytes were altered, or the advertisement
        /// came from another device than the address says. Nothing of it is used.
        public static let authenticationFailed = Code("authenticationFailed")
        /// The encryption counter went back: an old advertisement sent again (see ``ReplayGuard``).
        public static let replayed = Code("replayed")
        /// The advertisement is encrypted and no key was given for the device.
        public static let keyRequired = Code("keyRequired")
        /// The device has a key but sent a plain advertisement: refused, because anyone can send a plain one (an
        /// attacker would otherwise downgrade an encrypted device to forged plain data).
        public static let plainFromKeyedDevice = Code("plainFromKeyedDevice")
        /// A key was given but no ``AESCCM`` implementation, or the implementation's library could not be loaded.
        public static let decryptionUnavailable = Code("decryptionUnavailable")
        /// The encryption scheme is one this module refuses (MiBeacon 2 and 3: CCM without a tag, so a wrong key
        /// cannot be told from a right one).
        public static let unsupportedEncryption = Code("unsupportedEncryption")
        /// The address inside the advertisement is not the address it came from.
        public static let addressMismatch = Code("addressMismatch")
        /// A key is not 16 bytes written as 32 hexadecimal digits.
        public static let invalidKey = Code("invalidKey")
        /// A Bluetooth address is not six pairs of hexadecimal digits separated by colons.
        public static let invalidAddress = Code("invalidAddress")
    }

    /// What went wrong.
    public var code: Code
    /// The human explanation: the format, the address, the byte offset or object id, the numbers involved.
    public var message: String

    /// Creates an error.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}

extension AdvertisementError {
    /// "BTHome from 54:48:E6:8F:80:A5: …": every decoder's errors start with the format and the address.
    init(_ code: Code, _ format: AdvertisementFormat, _ address: BluetoothAddress, _ detail: String) {
        self.init(code, "\(format.displayName) from \(address): \(detail)")
    }

    /// "needs 4 bytes at offset 11, has 9".
    static func truncated(
        _ format: AdvertisementFormat, _ address: BluetoothAddress, _ what: String, needs count: Int, at offset: Int,
        has available: Int
    ) -> AdvertisementError {
        AdvertisementError(
            .truncated, format, address,
            "\(what) needs \(count) \(count == 1 ? "byte" : "bytes") at offset \(offset), the data has \(available)")
    }
}
