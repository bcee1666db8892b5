import Readings
import Testing

@testable import LibCrypto

/// AES-128-CCM over libcrypto against the published vectors of CCM itself, and what a process without libcrypto is
/// told. (The advertisement formats' own encrypted vectors are in ReadingsTests.)
@Suite("LibCrypto AES-128-CCM")
struct LibCryptoAESCCMTests {
    /// One published CCM example: key, nonce, associated data, plaintext, ciphertext, tag.
    struct Vector: Sendable, CustomStringConvertible {
        var name: String
        var key: [UInt8]
        var nonce: [UInt8]
        var associatedData: [UInt8]
        var plaintext: [UInt8]
        var ciphertext: [UInt8]
        var tag: [UInt8]

        var description: String { name }
    }

    static func bytes(_ hex: String) -> [UInt8] {
        var result: [UInt8] = []
        var digits = hex.filter { !$0.isWhitespace }[...]
        while digits.count >= 2 {
            result.append(UInt8(digits.prefix(2), radix: 16) ?? 0)
            digits = digits.dropFirst(2)
        }
        return result
    }

    static let vectors: [Vector] = [
        // NIST SP 800-38C, Appendix C, Example 1 (4-byte tag, 7-byte nonce: the tag length BTHome and MiBeacon use).
        Vector(
            name: "SP 800-38C C.1", key: bytes("404142434445464748494a4b4c4d4e4f"), nonce: bytes("10111213141516"),
            associatedData: bytes("0001020304050607"), plaintext: bytes("20212223"), ciphertext: bytes("7162015b"),
            tag: bytes("4dac255d")),
        // NIST SP 800-38C, Appendix C, Example 2 (6-byte tag).
        Vector(
            name: "SP 800-38C C.2", key: bytes("404142434445464748494a4b4c4d4e4f"),
            nonce: bytes("1011121314151617"), associatedData: bytes("000102030405060708090a0b0c0d0e0f"),
            plaintext: bytes("202122232425262728292a2b2c2d2e2f"),
            ciphertext: bytes("d2a1f0e051ea5f62081a7792073d593d"), tag: bytes("1fc64fbfaccd")),
        // RFC 3610, section 8, Packet Vector #1 (13-byte nonce, as BTHome's; 8-byte tag).
        Vector(
            name: "RFC 3610 #1", key: bytes("c0c1c2c3c4c5c6c7c8c9cacbcccdcecf"),
            nonce: bytes("00000003020100a0a1a2a3a4a5"), associatedData: bytes("0001020304050607"),
            plaintext: bytes("08090a0b0c0d0e0f101112131415161718191a1b1c1d1e"),
            ciphertext: bytes("588c979a61c663d2f066d0c2c0f989806d5f6b61dac384"), tag: bytes("17e8d12cfdf926e0")),
        // RFC 3610, section 8, Packet Vector #2.
        Vector(
            name: "RFC 3610 #2", key: bytes("c0c1c2c3c4c5c6c7c8c9cacbcccdcecf"),
            nonce: bytes("00000004030201a0a1a2a3a4a5"), associatedData: bytes("0001020304050607"),
            plaintext: bytes("08090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"),
            ciphertext: bytes("72c91a36e135f8cf291ca894085c87e3cc15c439c9e43a3b"), tag: bytes("a091d56e10400916")),
    ]

    let cipher = LibCryptoAESCCM()

    @Test(arguments: vectors)
    func openingAPublishedVectorGivesItsPlaintext(_ vector: Vector) throws {
        let plaintext = try cipher.open(
            ciphertext: vector.ciphertext[...], tag: vector.tag[...], key: vector.key, nonce: vector.nonce,
            associatedData: vector.associatedData)
        #expect(plaintext == vector.plaintext)
    }

    @Test(arguments: vectors)
    func sealingAPublishedVectorGivesItsCiphertextAndTag(_ vector: Vector) throws {
        let sealed = try cipher.seal(
            plaintext: vector.plaintext, key: vector.key, nonce: vector.nonce, associatedData: vector.associatedData,
            tagLength: vector.tag.count)
        #expect(sealed.ciphertext == vector.ciphertext)
        #expect(sealed.tag == vector.tag)
    }

    @Test(arguments: vectors)
    func anyChangedByteFailsAuthentication(_ vector: Vector) {
        var key = vector.key
        key[0] ^= 1
        var ciphertext = vector.ciphertext
        ciphertext[ciphertext.count - 1] ^= 0x80
        var tag = vector.tag
        tag[0] ^= 1
        var nonce = vector.nonce
        nonce[nonce.count - 1] ^= 1
        var associatedData = vector.associatedData
        associatedData[0] ^= 1
        let altered: [(String, [UInt8], [UInt8], [UInt8], [UInt8], [UInt8])] = [
            ("key", key, vector.ciphertext, vector.tag, vector.nonce, vector.associatedData),
            ("ciphertext", vector.key, ciphertext, vector.tag, vector.nonce, vector.associatedData),
            ("tag", vector.key, vector.ciphertext, tag, vector.nonce, vector.associatedData),
            ("nonce", vector.key, vector.ciphertext, vector.tag, nonce, vector.associatedData),
            ("associated data", vector.key, vector.ciphertext, vector.tag, vector.nonce, associatedData),
        ]
        for (what, key, ciphertext, tag, nonce, associatedData) in altered {
            #expect(throws: AESCCMError.self, "altered \(what)") {
                try cipher.open(
                    ciphertext: ciphertext[...], tag: tag[...], key: key, nonce: nonce, associatedData: associatedData)
            }
            do {
                _ = try cipher.open(
                    ciphertext: ciphertext[...], tag: tag[...], key: key, nonce: nonce, associatedData: associatedData)
            } catch {
                #expect(error.code == .authenticationFailed, "altered \(what)")
            }
        }
    }

    @Test func anEmptyMessageStillCarriesAnAuthenticatedTag() throws {
        let key = Self.bytes("404142434445464748494a4b4c4d4e4f")
        let nonce = Self.bytes("10111213141516171819aabbcc")
        let sealed = try cipher.seal(plaintext: [], key: key, nonce: nonce, associatedData: [0x11])
        #expect(sealed.ciphertext.isEmpty)
        #expect(sealed.tag.count == 4)
        #expect(
            try cipher.open(ciphertext: [], tag: sealed.tag[...], key: key, nonce: nonce, associatedData: [0x11]) == [])
        var wrong = sealed.tag
        wrong[3] ^= 1
        #expect(throws: AESCCMError.self) {
            try cipher.open(ciphertext: [], tag: wrong[...], key: key, nonce: nonce, associatedData: [0x11])
        }
    }

    @Test func lengthsCCMDoesNotAllowAreInvalidInputNamingTheCount() {
        let key = [UInt8](repeating: 0, count: 16)
        let cases: [(key: [UInt8], nonce: Int, tag: Int, message: String)] = [
            ([UInt8](repeating: 0, count: 15), 13, 4, "an AES-128 key has 16 bytes, this one has 15"),
            (key, 6, 4, "a CCM nonce has 7 to 13 bytes, this one has 6"),
            (key, 14, 4, "a CCM nonce has 7 to 13 bytes, this one has 14"),
            (key, 13, 3, "a CCM tag has 4, 6, … or 16 bytes, this one has 3"),
            (key, 13, 5, "a CCM tag has 4, 6, … or 16 bytes, this one has 5"),
        ]
        for item in cases {
            do {
                _ = try cipher.open(
                    ciphertext: [1, 2, 3], tag: [UInt8](repeating: 0, count: item.tag)[...], key: item.key,
                    nonce: [UInt8](repeating: 0, count: item.nonce), associatedData: [])
                Issue.record("accepted \(item.message)")
            } catch {
                #expect(error == AESCCMError(.invalidInput, item.message))
            }
        }
    }

    @Test func aMissingLibraryIsNamedWithThePackageThatProvidesIt() {
        let missing = LibCryptoAESCCM(loading: "libcrypto-absent.so.9")
        do {
            _ = try missing.open(
                ciphertext: [1], tag: [1, 2, 3, 4], key: [UInt8](repeating: 0, count: 16),
                nonce: [UInt8](repeating: 0, count: 13), associatedData: [])
            Issue.record("opened without a library")
        } catch {
            #expect(error.code == .unavailable)
            #expect(error.message.contains("cannot load libcrypto-absent.so.9"))
            #expect(error.message.contains("apt install libssl3"))
        }
    }

    @Test func aLibraryWithoutTheFunctionsSaysWhichOneIsMissing() {
        // libdbus is on every machine that runs these tests, and has none of OpenSSL's functions.
        let wrong = LibCryptoAESCCM(loading: "libdbus-1.so.3")
        #expect(throws: AESCCMError(.unavailable, "libdbus-1.so.3 has no OpenSSL_version (OpenSSL 3 is needed)")) {
            try wrong.libraryVersion()
        }
    }

    @Test func theInstalledLibraryIsOpenSSL3() throws {
        #expect(try cipher.libraryVersion().hasPrefix("OpenSSL 3."))
    }
}
