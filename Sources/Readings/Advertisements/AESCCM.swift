/// AES-128 in CCM mode (NIST SP 800-38C, RFC 3610), the one cipher encrypted advertisements use: BTHome and
/// MiBeacon 4/5 both authenticate with a 4-byte tag.
///
/// The decoders only open (decrypt and verify); they never implement the cipher. This protocol keeps the module
/// pure and free of C: the implementation over OpenSSL's libcrypto is `LibCryptoAESCCM` in the `LibCrypto`
/// module, which loads the library the first time it is asked, so a process that never sees a key never maps it.
///
/// The contract: ``open(ciphertext:tag:key:nonce:associatedData:)`` returns the plaintext only when the tag
/// verifies; otherwise it throws ``AESCCMError/Code/authenticationFailed`` and no plaintext escapes.
/// Implementations are values shared across threads (`Sendable`).
public protocol AESCCM: Sendable {
    /// Decrypts `ciphertext` and verifies `tag` over it and `associatedData`.
    ///
    /// - Parameters:
    ///   - ciphertext: the encrypted bytes (may be empty).
    ///   - tag: the message integrity check, 4 to 16 bytes, an even count.
    ///   - key: the 16-byte AES-128 key.
    ///   - nonce: 7 to 13 bytes.
    ///   - associatedData: authenticated, not encrypted (MiBeacon's one byte `0x11`; empty for BTHome).
    /// - Returns: the plaintext, as many bytes as `ciphertext`.
    /// - Throws: ``AESCCMError`` (`authenticationFailed`, `unavailable`, `invalidInput`).
    func open(
        ciphertext: ArraySlice<UInt8>,
        tag: ArraySlice<UInt8>,
        key: [UInt8],
        nonce: [UInt8],
        associatedData: [UInt8]
    ) throws(AESCCMError) -> [UInt8]
}

/// Why an ``AESCCM`` implementation could not open a message.
public struct AESCCMError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong. Extensible.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's stable spelling.
        public let rawValue: String

        /// Creates a code; two codes are equal when their raw values are.
        public init(_ rawValue: String) {
            self.rawValue = rawValue
        }

        public var description: String { rawValue }

        /// The tag does not match: a wrong key, a wrong nonce (another device's address), or altered bytes.
        public static let authenticationFailed = Code("authenticationFailed")
        /// The implementation's library could not be loaded or lacks a function (the message says which).
        public static let unavailable = Code("unavailable")
        /// A key, nonce or tag of a length CCM does not allow.
        public static let invalidInput = Code("invalidInput")
    }

    /// What went wrong.
    public var code: Code
    /// The explanation, with the library's own text where it gave one.
    public var message: String

    /// Creates an error.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}
