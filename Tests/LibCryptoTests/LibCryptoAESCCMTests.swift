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

/// The context each thread keeps between messages against a context made for each: the same plaintext or the same
/// failure for any sequence of keys, nonce and tag lengths, associated data, tampered tags and empty messages, on
/// several threads at once.
@Suite("LibCrypto kept contexts")
struct LibCryptoKeptContextTests {
    struct Message {
        var key: [UInt8]
        var nonce: [UInt8]
        var associatedData: [UInt8]
        var ciphertext: [UInt8]
        var tag: [UInt8]
    }

    static func messages(seed: UInt64, count: Int) throws -> [Message] {
        let library = try LibCrypto.shared.get()
        var state = seed
        func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8(truncatingIfNeeded: next()) } }
        let keys = [bytes(16), bytes(16), bytes(16)]
        var messages: [Message] = []
        for _ in 0..<count {
            let key = keys[Int(next() % 3)]
            let nonce = bytes([7, 12, 13][Int(next() % 3)])
            let tagLength = [4, 4, 8, 16][Int(next() % 4)]
            let associatedData: [UInt8] = next() % 2 == 0 ? [] : [0x11]
            let plaintext = bytes(Int(next() % 20))
            let sealed = try library.seal(
                plaintext: plaintext, key: key, nonce: nonce, associatedData: associatedData, tagLength: tagLength)
            var message = Message(
                key: key, nonce: nonce, associatedData: associatedData, ciphertext: sealed.ciphertext, tag: sealed.tag)
            switch next() % 6 {
            case 0: message.tag[0] ^= 1
            case 1 where !message.ciphertext.isEmpty: message.ciphertext[0] ^= 0x80
            case 2: message.key = keys[(keys.firstIndex(of: key)! + 1) % 3]
            default: break
            }
            messages.append(message)
        }
        return messages
    }

    static func open(_ message: Message, reusing: Bool) throws -> Result<[UInt8], AESCCMError> {
        let library = try LibCrypto.shared.get()
        do throws(AESCCMError) {
            return .success(
                try library.open(
                    ciphertext: message.ciphertext[...], tag: message.tag[...], key: message.key,
                    nonce: message.nonce, associatedData: message.associatedData, reusingContext: reusing))
        } catch {
            return .failure(error)
        }
    }

    @Test func aKeptContextOpensAsANewOneDoes() throws {
        let messages = try Self.messages(seed: 1, count: 3_000)
        var failures = 0
        for (index, message) in messages.enumerated() {
            let expected = try Self.open(message, reusing: false)
            let actual = try Self.open(message, reusing: true)
            #expect(actual == expected, "message \(index)")
            if case .failure = expected { failures += 1 }
        }
        #expect(failures > 100 && failures < 2_000, "both outcomes are exercised")
    }

    @Test func threadsKeepContextsOfTheirOwn() async throws {
        try await withThrowingTaskGroup(of: Int.self) { group in
            for seed in 10..<14 {
                group.addTask {
                    let messages = try Self.messages(seed: UInt64(seed), count: 500)
                    let expected = try messages.map { try Self.open($0, reusing: false) }
                    var mismatches = 0
                    for _ in 0..<4 {
                        for (message, result) in zip(messages, expected)
                        where try Self.open(message, reusing: true) != result {
                            mismatches += 1
                        }
                    }
                    return mismatches
                }
            }
            for try await mismatches in group { #expect(mismatches == 0) }
        }
    }
}
