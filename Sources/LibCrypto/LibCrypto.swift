import CLibCrypto
import Readings

#if canImport(Glibc)
    import Glibc
#endif

// Every raw libcrypto call made by this module lives in this file, as libmosquitto's do in
// Sources/MQTT/LibMosquitto.swift: one place to audit what crosses into C.

/// libcrypto's functions, found with `dlsym` in `libcrypto.so.3` (OpenSSL 3, Debian's libssl3). The library is
/// loaded the first time an advertisement is decrypted, not linked: a daemon without advertisement keys never maps
/// it, and the daemon's resident memory is gated (Benchmarks/NOTES.md, "RSS"). Each function's type comes from its
/// declaration in <openssl/evp.h> (`clibcrypto_*_t` in the shim), so a call here is checked against the header as a
/// direct call would be.
struct LibCrypto: @unchecked Sendable {
    // @unchecked Sendable: immutable C function pointers into a library that is never unloaded, and the fetched
    // AES-128-CCM implementation, which OpenSSL documents as shareable between threads once fetched.
    /// The soname of OpenSSL 3's libcrypto.
    static let soname = "libcrypto.so.3"

    /// The process's copy, loaded on first use: Swift runs a global's initialiser exactly once, thread-safely. A
    /// failure is kept, and every decryption after it fails the same way.
    static let shared: Result<LibCrypto, AESCCMError> = load(soname)

    let version: clibcrypto_OpenSSL_version_t
    let cipherContextNew: clibcrypto_EVP_CIPHER_CTX_new_t
    let cipherContextFree: clibcrypto_EVP_CIPHER_CTX_free_t
    let cipherContextControl: clibcrypto_EVP_CIPHER_CTX_ctrl_t
    let decryptInit: clibcrypto_EVP_DecryptInit_ex_t
    let decryptUpdate: clibcrypto_EVP_DecryptUpdate_t
    let encryptInit: clibcrypto_EVP_EncryptInit_ex_t
    let encryptUpdate: clibcrypto_EVP_EncryptUpdate_t
    let encryptFinal: clibcrypto_EVP_EncryptFinal_ex_t
    let clearErrors: clibcrypto_ERR_clear_error_t
    /// `EVP_CIPHER_fetch(NULL, "AES-128-CCM", NULL)`, once: OpenSSL 3 looks an implicitly fetched cipher up again
    /// on every initialisation, an explicitly fetched one it does not.
    let aes128CCM: OpaquePointer
    /// The thread-specific slot of each thread's ``ThreadCipherContext`` (`pthread_key_create`), `nil` when the
    /// process has no key left: then every message gets a context of its own, as before contexts were kept.
    let threadContexts: pthread_key_t?

    /// `dlopen(path)`, every function looked up, AES-128-CCM fetched. The library stays loaded for the life of the
    /// process (no `dlclose`: its state is process-wide, and libmosquitto may share it).
    static func load(_ path: String) -> Result<LibCrypto, AESCCMError> {
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "no reason given"
            return .failure(
                AESCCMError(
                    .unavailable,
                    "cannot load \(path), OpenSSL's libcrypto, to decrypt advertisements "
                        + "(Debian: apt install libssl3): \(reason)"))
        }
        do {
            return .success(try LibCrypto(handle, path: path))
        } catch {
            dlclose(handle)
            return .failure(error)
        }
    }

    private init(_ handle: UnsafeMutableRawPointer, path: String) throws(AESCCMError) {
        func symbol<Function>(_ name: String) throws(AESCCMError) -> Function {
            guard let address = dlsym(handle, name) else {
                throw AESCCMError(.unavailable, "\(path) has no \(name) (OpenSSL 3 is needed)")
            }
            return unsafeBitCast(address, to: Function.self)
        }
        version = try symbol("OpenSSL_version")
        cipherContextNew = try symbol("EVP_CIPHER_CTX_new")
        cipherContextFree = try symbol("EVP_CIPHER_CTX_free")
        cipherContextControl = try symbol("EVP_CIPHER_CTX_ctrl")
        decryptInit = try symbol("EVP_DecryptInit_ex")
        decryptUpdate = try symbol("EVP_DecryptUpdate")
        encryptInit = try symbol("EVP_EncryptInit_ex")
        encryptUpdate = try symbol("EVP_EncryptUpdate")
        encryptFinal = try symbol("EVP_EncryptFinal_ex")
        clearErrors = try symbol("ERR_clear_error")
        let fetch: clibcrypto_EVP_CIPHER_fetch_t = try symbol("EVP_CIPHER_fetch")
        guard let cipher = fetch(nil, "AES-128-CCM", nil) else {
            throw AESCCMError(.unavailable, "\(path) has no AES-128-CCM (EVP_CIPHER_fetch failed)")
        }
        aes128CCM = cipher
        var slot = pthread_key_t()
        // The destructor runs when a thread ends: it frees that thread's context.
        let created = pthread_key_create(&slot) { state in
            guard let state else { return }
            Unmanaged<ThreadCipherContext>.fromOpaque(state).release()
        }
        threadContexts = created == 0 ? slot : nil
    }

    /// `OpenSSL_version(OPENSSL_VERSION)`: "OpenSSL 3.0.19 27 Jan 2026".
    var versionText: String {
        version(OPENSSL_VERSION).map { String(cString: $0) } ?? "OpenSSL (version unknown)"
    }
}

// MARK: - One AES-128-CCM operation

extension LibCrypto {
    /// The parameters every CCM operation checks, with the message saying which one is off.
    static func checkLengths(key: Int, nonce: Int, tag: Int) throws(AESCCMError) {
        guard key == 16 else { throw AESCCMError(.invalidInput, "an AES-128 key has 16 bytes, this one has \(key)") }
        guard (7...13).contains(nonce) else {
            throw AESCCMError(.invalidInput, "a CCM nonce has 7 to 13 bytes, this one has \(nonce)")
        }
        guard (4...16).contains(tag), tag.isMultiple(of: 2) else {
            throw AESCCMError(.invalidInput, "a CCM tag has 4, 6, … or 16 bytes, this one has \(tag)")
        }
    }

    /// Decrypts and verifies on the calling thread's kept context (``ThreadCipherContext``); on a context of its own
    /// when `reusingContext` is false or the process has no thread-specific slot left. Both give the same result for
    /// the same input: the kept context only skips what is already set up.
    func open(
        ciphertext: ArraySlice<UInt8>, tag: ArraySlice<UInt8>, key: [UInt8], nonce: [UInt8],
        associatedData: [UInt8], reusingContext: Bool = true
    ) throws(AESCCMError) -> [UInt8] {
        try Self.checkLengths(key: key.count, nonce: nonce.count, tag: tag.count)
        guard reusingContext, let threadContexts else {
            return try openOnNewContext(
                ciphertext: ciphertext, tag: tag, key: key, nonce: nonce, associatedData: associatedData)
        }
        let kept: ThreadCipherContext
        if let state = pthread_getspecific(threadContexts) {
            kept = Unmanaged<ThreadCipherContext>.fromOpaque(state).takeUnretainedValue()
        } else {
            kept = ThreadCipherContext(free: cipherContextFree)
            guard pthread_setspecific(threadContexts, Unmanaged.passRetained(kept).toOpaque()) == 0 else {
                Unmanaged.passUnretained(kept).release()
                return try openOnNewContext(
                    ciphertext: ciphertext, tag: tag, key: key, nonce: nonce, associatedData: associatedData)
            }
        }
        if kept.context == nil {
            guard let context = cipherContextNew() else {
                throw AESCCMError(.unavailable, "EVP_CIPHER_CTX_new failed (out of memory)")
            }
            guard decryptInit(context, aes128CCM, nil, nil, nil) == 1 else {
                cipherContextFree(context)
                clearErrors()
                throw AESCCMError(.unavailable, "EVP_DecryptInit_ex refused AES-128-CCM")
            }
            kept.context = context
        }
        guard let context = kept.context else {
            throw AESCCMError(.unavailable, "EVP_CIPHER_CTX_new failed (out of memory)")
        }
        // CCM fixes the nonce's and the tag's lengths in its state when the key is set, so the key is set again
        // whenever either changes; else only when it is another key. The tag and the nonce go in every time (the
        // tag before the initialisation, as on a new context), and the message length after them, which restarts
        // the CCM state.
        let setsKey =
            !kept.isKeyed || kept.nonceLength != nonce.count || kept.tagLength != tag.count || kept.key != key
        let count = ciphertext.count
        var output = [UInt8](repeating: 0, count: max(count, 1))
        let verified = output.withUnsafeMutableBufferPointer { out -> Bool in
            guard let outAddress = out.baseAddress else { return false }
            return ciphertext.withUnsafeBufferPointer { input in
                tag.withUnsafeBufferPointer { expectedTag in
                    let inAddress = input.baseAddress ?? UnsafePointer(outAddress)
                    var written: Int32 = 0
                    return
                        (kept.nonceLength == nonce.count
                        || cipherContextControl(context, clibcrypto_ctrl_ccm_set_ivlen, Int32(nonce.count), nil) == 1)
                        && cipherContextControl(
                            context, clibcrypto_ctrl_ccm_set_tag, Int32(expectedTag.count),
                            UnsafeMutableRawPointer(mutating: expectedTag.baseAddress)) == 1
                        && (setsKey
                            ? decryptInit(context, nil, nil, key, nonce) == 1
                            : decryptInit(context, nil, nil, nil, nonce) == 1)
                        && decryptUpdate(context, nil, &written, nil, Int32(count)) == 1
                        && (associatedData.isEmpty
                            || decryptUpdate(context, nil, &written, associatedData, Int32(associatedData.count)) == 1)
                        && decryptUpdate(context, outAddress, &written, inAddress, Int32(count)) > 0
                }
            }
        }
        guard verified else {
            // Whatever failed, the next message starts on a new context.
            kept.discard()
            clearErrors()
            throw AESCCMError(.authenticationFailed, "the \(tag.count)-byte CCM tag does not verify")
        }
        if setsKey {
            kept.isKeyed = true
            kept.key = key
            kept.nonceLength = nonce.count
            kept.tagLength = tag.count
        }
        if count == 0 { return [] }
        return output
    }

    /// `EVP_DecryptInit_ex` with the nonce length and the expected tag, then the key and nonce, the message
    /// length, the associated data and the ciphertext (the order CCM requires: it must know the length first).
    /// `EVP_DecryptUpdate` on the ciphertext returns > 0 only when the tag verified; the plaintext is released only
    /// then. A context made for the one message and freed after it.
    func openOnNewContext(
        ciphertext: ArraySlice<UInt8>, tag: ArraySlice<UInt8>, key: [UInt8], nonce: [UInt8],
        associatedData: [UInt8]
    ) throws(AESCCMError) -> [UInt8] {
        guard let context = cipherContextNew() else {
            throw AESCCMError(.unavailable, "EVP_CIPHER_CTX_new failed (out of memory)")
        }
        defer { cipherContextFree(context) }
        // An output of at least one byte, so that an empty message still has addresses to pass: the call on the
        // ciphertext is the one that checks the tag, and CCM makes it even for no bytes. The input and the tag are
        // read where they are, without a copy.
        let count = ciphertext.count
        var output = [UInt8](repeating: 0, count: max(count, 1))
        let verified = output.withUnsafeMutableBufferPointer { out -> Bool in
            guard let outAddress = out.baseAddress else { return false }
            return ciphertext.withUnsafeBufferPointer { input in
                tag.withUnsafeBufferPointer { expectedTag in
                    let inAddress = input.baseAddress ?? UnsafePointer(outAddress)
                    var written: Int32 = 0
                    return decryptInit(context, aes128CCM, nil, nil, nil) == 1
                        && cipherContextControl(context, clibcrypto_ctrl_ccm_set_ivlen, Int32(nonce.count), nil) == 1
                        && cipherContextControl(
                            context, clibcrypto_ctrl_ccm_set_tag, Int32(expectedTag.count),
                            UnsafeMutableRawPointer(mutating: expectedTag.baseAddress)) == 1
                        && decryptInit(context, nil, nil, key, nonce) == 1
                        && decryptUpdate(context, nil, &written, nil, Int32(count)) == 1
                        && (associatedData.isEmpty
                            || decryptUpdate(context, nil, &written, associatedData, Int32(associatedData.count)) == 1)
                        && decryptUpdate(context, outAddress, &written, inAddress, Int32(count)) > 0
                }
            }
        }
        guard verified else {
            clearErrors()
            throw AESCCMError(.authenticationFailed, "the \(tag.count)-byte CCM tag does not verify")
        }
        if count == 0 { return [] }
        return output
    }

    /// The other direction, for tests and for a simulator that sends encrypted advertisements: the ciphertext and
    /// a `tagLength`-byte tag.
    func seal(
        plaintext: [UInt8], key: [UInt8], nonce: [UInt8], associatedData: [UInt8], tagLength: Int
    ) throws(AESCCMError) -> (ciphertext: [UInt8], tag: [UInt8]) {
        try Self.checkLengths(key: key.count, nonce: nonce.count, tag: tagLength)
        guard let context = cipherContextNew() else {
            throw AESCCMError(.unavailable, "EVP_CIPHER_CTX_new failed (out of memory)")
        }
        defer { cipherContextFree(context) }
        var ciphertext = [UInt8](repeating: 0, count: max(plaintext.count, 1))
        var tag = [UInt8](repeating: 0, count: tagLength)
        var written: Int32 = 0
        var finalWritten: Int32 = 0
        let input = plaintext.isEmpty ? [0] : plaintext
        let sealed =
            encryptInit(context, aes128CCM, nil, nil, nil) == 1
            && cipherContextControl(context, clibcrypto_ctrl_ccm_set_ivlen, Int32(nonce.count), nil) == 1
            && cipherContextControl(context, clibcrypto_ctrl_ccm_set_tag, Int32(tagLength), nil) == 1
            && encryptInit(context, nil, nil, key, nonce) == 1
            && encryptUpdate(context, nil, &written, nil, Int32(plaintext.count)) == 1
            && (associatedData.isEmpty
                || encryptUpdate(context, nil, &written, associatedData, Int32(associatedData.count)) == 1)
            && encryptUpdate(context, &ciphertext, &written, input, Int32(plaintext.count)) == 1
            && encryptFinal(context, &ciphertext, &finalWritten) == 1
            && cipherContextControl(context, clibcrypto_ctrl_ccm_get_tag, Int32(tagLength), &tag) == 1
        guard sealed else {
            clearErrors()
            throw AESCCMError(.invalidInput, "libcrypto refused to encrypt")
        }
        return (Array(ciphertext.prefix(plaintext.count)), tag)
    }
}

/// One thread's AES-128-CCM decryption context, kept between messages: `EVP_CIPHER_CTX_new`, the provider's context
/// and the cipher's initialisation cost more than a whole advertisement's decryption, and OpenSSL 3 looks the nonce
/// and tag lengths up by name (`OSSL_PARAM`) on each. A context is not shareable between threads, so each thread
/// that decrypts has one, in a `pthread` thread-specific slot that frees it when the thread ends. Only its thread
/// touches it, and never re-entrantly (nothing calls back into Swift during a decryption).
final class ThreadCipherContext {
    let free: clibcrypto_EVP_CIPHER_CTX_free_t
    /// The context, initialised for AES-128-CCM decryption; `nil` before the first message and after a failure.
    var context: OpaquePointer?
    /// Whether a key is set, and which, for which nonce and tag lengths (CCM fixes both when the key is set).
    var isKeyed = false
    var key: [UInt8] = []
    var nonceLength = 0
    var tagLength = 0

    init(free: clibcrypto_EVP_CIPHER_CTX_free_t) {
        self.free = free
    }

    /// Frees the context: the next message starts on a new one.
    func discard() {
        if let context { free(context) }
        context = nil
        isKeyed = false
        key = []
        nonceLength = 0
        tagLength = 0
    }

    deinit {
        if let context { free(context) }
    }
}
