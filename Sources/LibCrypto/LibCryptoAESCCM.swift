public import Readings

/// ``Readings/AESCCM`` over OpenSSL 3's libcrypto (`EVP_aes_128_ccm`), for ``Readings/AdvertisementDecoder``.
///
/// Making one costs nothing: libcrypto is loaded (`dlopen("libcrypto.so.3")`) the first time a message is opened
/// or sealed, once per process, so a daemon that never decrypts an advertisement never maps it. When it cannot be
/// loaded, every call throws ``Readings/AESCCMError/Code/unavailable`` saying why (the library's
/// name, `dlerror`'s text, the Debian package that provides it).
///
/// ```swift
/// let decoder = AdvertisementDecoder(cipher: LibCryptoAESCCM())
/// ```
public struct LibCryptoAESCCM: AESCCM {
    /// The library, or why it could not be loaded; the process's shared copy unless a test gives another.
    private let library: @Sendable () -> Result<LibCrypto, AESCCMError>

    /// The implementation over the process's libcrypto.so.3.
    public init() {
        library = { LibCrypto.shared }
    }

    /// An implementation over the library at `path`, loaded now (for tests of a missing or wrong library).
    init(loading path: String) {
        let loaded = LibCrypto.load(path)
        library = { loaded }
    }

    public func open(
        ciphertext: ArraySlice<UInt8>,
        tag: ArraySlice<UInt8>,
        key: [UInt8],
        nonce: [UInt8],
        associatedData: [UInt8]
    ) throws(AESCCMError) -> [UInt8] {
        try library().get().open(
            ciphertext: ciphertext, tag: tag, key: key, nonce: nonce, associatedData: associatedData)
    }

    /// Encrypts `plaintext` and computes its tag: what a device does, for tests and simulators that need encrypted
    /// advertisements of their own.
    ///
    /// - Parameter tagLength: 4 to 16 bytes, even (BTHome and MiBeacon use 4).
    /// - Returns: the ciphertext (as many bytes as the plaintext) and the tag.
    public func seal(
        plaintext: [UInt8],
        key: [UInt8],
        nonce: [UInt8],
        associatedData: [UInt8] = [],
        tagLength: Int = 4
    ) throws(AESCCMError) -> (ciphertext: [UInt8], tag: [UInt8]) {
        try library().get().seal(
            plaintext: plaintext, key: key, nonce: nonce, associatedData: associatedData, tagLength: tagLength)
    }

    /// The loaded library's version text ("OpenSSL 3.0.19 27 Jan 2026"), loading it if need be.
    /// - Throws: ``Readings/AESCCMError/Code/unavailable`` when it cannot be loaded.
    public func libraryVersion() throws(AESCCMError) -> String {
        try library().get().versionText
    }
}
