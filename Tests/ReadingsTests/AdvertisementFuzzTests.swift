import Basics
import LibCrypto
import Testing

@testable import Readings

/// Random advertisements through every decoder, plain and with a key: the process must not trap (a trap would end
/// the test run, so reaching the end is the proof), every failure is an ``AdvertisementError`` (typed throws: the
/// compiler holds the decoders to it), and every result keeps the decoders' promises (unique names, a reason for
/// every missing value, finite numbers). Iterations: KEEPALIVE_FUZZ_ITERATIONS (default 2,000; CI's fuzz stage
/// runs 100,000). 100,000 in the whole suite held both threads of a 2-core machine's pool for seconds at start,
/// and tests waiting on real time beside it timed out.
@Suite("Advertisement fuzz")
struct AdvertisementFuzzTests {
    static var iterations: Int {
        environment("KEEPALIVE_FUZZ_ITERATIONS").flatMap { Int($0) }.map { max(1, $0) } ?? 2_000
    }

    /// Published vectors, each as (source, bytes, the address it came from), to mutate: random bytes alone rarely
    /// get past a header.
    static let corpus: [(AdvertisementSource, [UInt8], BluetoothAddress)] = [
        (.bthome, Advertised.bytes("40 0009 015d 025d09 03b718 3a01 3c0103 530348 6921 f100010204"), other),
        (.bthome, Advertised.bytes("44 505d396164 540c48656c6c6f20576f726c6421 3b0201aa"), other),
        (.bthome, Advertised.bytes("42 b2188d38c1a4 04138a01 5c02fbffff 62 4099dfff"), other),
        (
            .mibeacon, Advertised.bytes("5020aa01a3bf2e3b342d580d1004b40095020a10013b"),
            Advertised.address("58:2D:34:3B:2E:BF")
        ),
        (
            .mibeacon, Advertised.bytes("71209800 12f34f6b8d7cc4 0d 041002c400 0f0003640000 19100100"),
            Advertised.address("C4:7C:8D:6B:4F:F3")
        ),
        (.mibeacon, Advertised.bytes("5040 0a04 01 0a04008d7cc4 1310015a 014c04cdccd041 084c0400003442"), other),
        (.environmentalSensing, Advertised.bytes("5cc8ee38c1a4b008c314ca0a501405"), other),
        (.environmentalSensing, Advertised.bytes("a4c138aabbcc00ce33430a6ec3"), other),
        (.ruuvi, Advertised.bytes("0512FC5394C37C0004FFFC040CAC364200CDCBB8334C884F"), other),
        (.ruuvi, Advertised.bytes("058000FFFFFFFF800080008000FFFFFFFFFFFFFFFFFFFFFF"), other),
    ]
    static let other = Advertised.address("C4:7C:8D:00:04:0A")

    static let sources: [AdvertisementSource] = [
        .bthome, .mibeacon, .environmentalSensing, .ruuvi, .serviceData(uuid16: 0x181C),
    ]

    /// Checks the decoders' promises on one result.
    static func check(_ payload: AdvertisementPayload, _ context: @autoclosure () -> String) {
        var names: Set<String> = []
        for reading in payload.readings {
            if reading.value == nil && reading.error == nil {
                Issue.record("\(reading.name) has neither value nor error: \(context())")
            }
            if case .number(let number) = reading.value, !number.isFinite {
                Issue.record("\(reading.name) is not finite: \(context())")
            }
            names.insert(reading.name)
        }
        if names.count != payload.readings.count { Issue.record("duplicate reading names: \(context())") }
        if payload.counter != nil && !payload.isEncrypted { Issue.record("a counter on a plain payload: \(context())") }
    }

    /// A device's encrypted BTHome or MiBeacon advertisement around random objects, sealed with the device's key,
    /// so that random data reaches the object decoders behind a tag that verifies.
    static func sealed(
        mibeacon: Bool, objects: [UInt8], counter: UInt32, address: BluetoothAddress, key: AdvertisementKey
    ) -> [UInt8]? {
        let counterBytes = (0..<4).map { UInt8(truncatingIfNeeded: counter >> UInt32(8 * $0)) }
        if mibeacon {
            var header: [UInt8] = [0x58, 0x58, 0x5B, 0x05, counterBytes[0]]
            header += address.reversedBytes
            let nonce = address.reversedBytes + header[2..<5] + counterBytes[1...]
            guard
                let sealed = try? Advertised.cipher.seal(
                    plaintext: objects, key: key.bytes, nonce: nonce, associatedData: [0x11])
            else { return nil }
            return header + sealed.ciphertext + counterBytes[1...] + sealed.tag
        }
        let nonce = address.bytes + [0xD2, 0xFC, 0x41] + counterBytes
        guard let sealed = try? Advertised.cipher.seal(plaintext: objects, key: key.bytes, nonce: nonce) else {
            return nil
        }
        return [0x41] + sealed.ciphertext + counterBytes + sealed.tag
    }

    @Test func advertisementDecodingFuzzRandomPayloads() throws {
        var random = SplitMix64(seed: 0xAD5E_0001)
        let iterations = Self.iterations
        let decoder = Advertised.decoder
        let key = try AdvertisementKey(hex: "231d39c1d7cc1ab1aee224cd096db932")
        var typedErrors = 0
        var decoded = 0
        var codes: [String: Int] = [:]
        var replay = ReplayGuard()
        var counter: UInt32 = 0
        for iteration in 0..<iterations {
            var address = BluetoothAddress(truncating: random.next())
            // A third random bytes, a third mutated vectors, a third sealed random objects; a key one time in eight
            // for plain data, seven in eight for sealed.
            var source: AdvertisementSource
            var bytes: [UInt8]
            var withKey = random.next() % 8 == 0
            switch iteration % 3 {
            case 0:
                source = Self.sources[Int(random.next() % UInt64(Self.sources.count))]
                let length = random.next() % 8 == 0 ? Int(random.next() % 64) : Int(random.next() % 26)
                bytes = random.bytes(count: length)
            case 1:
                let seed = Self.corpus[Int(random.next() % UInt64(Self.corpus.count))]
                source = seed.0
                bytes = seed.1
                address = seed.2
                for _ in 0..<Int(random.next() % 4 + 1) where !bytes.isEmpty {
                    let index = Int(random.next() % UInt64(bytes.count))
                    switch random.next() % 4 {
                    case 0: bytes[index] = UInt8(truncatingIfNeeded: random.next())
                    case 1: bytes.remove(at: index)
                    case 2: bytes.insert(UInt8(truncatingIfNeeded: random.next()), at: index)
                    default: bytes.removeSubrange(index...)
                    }
                }
            default:
                let mibeacon = random.next() % 2 == 0
                source = mibeacon ? .mibeacon : .bthome
                let objects = random.bytes(count: Int(random.next() % 20))
                // Counters go up, as a device's do; now and then an old one comes back.
                counter &+= 1
                let sent =
                    random.next() % 16 == 0 ? counter &- UInt32(truncatingIfNeeded: random.next() % 1000) : counter
                bytes =
                    Self.sealed(mibeacon: mibeacon, objects: objects, counter: sent, address: address, key: key) ?? []
                if random.next() % 16 == 0, !bytes.isEmpty {
                    bytes[Int(random.next() % UInt64(bytes.count))] ^= UInt8(truncatingIfNeeded: random.next() | 1)
                }
                withKey = random.next() % 8 != 0
            }
            do {
                let payload = try decoder.decode(
                    bytes, from: source, address: address, key: withKey ? key : nil, replayGuard: &replay)
                decoded += 1
                Self.check(payload, "\(source) \(Hex.string(bytes))")
            } catch {
                typedErrors += 1
                codes[error.code.rawValue, default: 0] += 1
                if error.message.isEmpty { Issue.record("an error without a message: \(error.code)") }
            }
        }
        #expect(decoded > 0)
        #expect(codes["authenticationFailed", default: 0] > 0)
        #expect(codes["replayed", default: 0] > 0)
        let breakdown = codes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        print(
            "fuzz: advertisements \(iterations) payloads, 0 traps, \(decoded) decoded, \(typedErrors) typed errors "
                + "(\(breakdown))")
    }
}
