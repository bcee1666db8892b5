import LibCrypto
import Testing

@testable import Readings

/// Encrypted BTHome: the published vectors, a wrong key, replayed counters, and the rules between keys and plain
/// advertisements. Sources as in ``BTHomeTests``.
@Suite("BTHome v2 encrypted")
struct BTHomeEncryptionTests {
    static let key = "231d39c1d7cc1ab1aee224cd096db932"
    static let address = "54:48:E6:8F:80:A5"
    /// [encryption] and [bthome-ble] test_bindkey_correct: counter bytes 00112233, little endian.
    static let example = "41 a47266c95f73 00112233 78237214"
    static let exampleReadings = [
        reading("temperature", .number(25.06), "°C"), reading("humidity", .number(50.55), "%"),
    ]

    @Test func theBTHomeEncryptionExampleDecryptsToItsValues() throws {
        let payload = try Advertised.decode(Self.example, from: .bthome, address: Self.address, key: Self.key)
        #expect(payload.readings == Self.exampleReadings)
        #expect(payload.isEncrypted)
        #expect(payload.counter == 0x3322_1100)
        #expect(!payload.isRepeat)
    }

    @Test func theOtherPublishedEncryptedVectorsDecrypt() throws {
        // [encryption] example 2 / [bthome-ble] test_bthome_motion.
        let motion = try Advertised.decode(
            "41 87b9 00112233 72b0231f", from: .bthome, address: Self.address, key: Self.key)
        #expect(motion.readings == [reading("motion", .boolean(true))])
        // [bthome-ble] test_bthome_with_mac_encrypted: the nonce takes the address the advertisement carries.
        let withAddress = try Advertised.decode(
            "43 a5808fe64854 f196c06ffb49 00112233 f08ecbde", from: .bthome, address: "01:02:03:04:05:06",
            key: Self.key)
        #expect(withAddress.readings == Self.exampleReadings)
        #expect(withAddress.advertisedAddress?.description == Self.address)
        // [bthome-ble] test_encrypted_shelly_blu_button_event: a trigger-based Shelly BLU Button1.
        let button = try Advertised.decode(
            "45 0aeb84467f85 ba010000 3188788c", from: .bthome, address: "B4:35:22:F5:3D:A4",
            key: "90bffd73cb6b26ef58a7a8eba9232036")
        #expect(button.readings == [reading("battery", .unsigned(100), "%"), reading("button", .text("press"))])
        #expect(button.packetID == 7)
        #expect(button.counter == 442)
        #expect(button.isTriggerBased)
        // [pvvx] encrypted bt_home_v2_format, count_id 9904.
        let pvvx = try Advertised.decode(
            "41 95b0efda789dd953 b0260000 9341626f", from: .bthome, address: "A4:C1:38:AA:BB:CC",
            key: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
        #expect(
            pvvx.readings == [
                reading("battery", .unsigned(80), "%"), reading("temperature", .number(19.2), "°C"),
                reading("humidity", .number(62.22), "%"),
            ])
        #expect(pvvx.counter == 9904)
    }

    @Test func aWrongKeyIsATypedErrorThatSaysSo() {
        // [bthome-ble] test_bindkey_wrong: another device's key.
        let error = Advertised.failure(
            "41 d2fcefe52eb212d6 00112233 bc38c966", from: .bthome, address: "A4:C1:38:8D:18:B2",
            key: "814aac74c4f17b6c1581e1ab87816b99")
        #expect(error?.code == .authenticationFailed)
        #expect(
            error?.message
                == "BTHome from A4:C1:38:8D:18:B2: the 4-byte tag does not verify with the device's key: a wrong key, "
                + "altered bytes, or another device's advertisement")
        // The example with a wrong key, and with the right key from another address (the nonce differs).
        #expect(
            Advertised.failure(
                Self.example, from: .bthome, address: Self.address, key: "814aac74c4f17b6c1581e1ab87816b99")?.code
                == .authenticationFailed)
        #expect(
            Advertised.failure(Self.example, from: .bthome, address: "54:48:E6:8F:80:A6", key: Self.key)?.code
                == .authenticationFailed)
        // [bthome-ble] test_bindkey_verified_can_be_unset: one counter byte changed.
        #expect(
            Advertised.failure(
                "41 a47266c95f73 00112233 78237215", from: .bthome, address: Self.address, key: Self.key)?.code
                == .authenticationFailed)
    }

    /// [bthome-ble] test_increasing_encryption_counter, test_same_encryption_counter,
    /// test_decreasing_encryption_counter, test_reset_encryption_counter: the same measurement sealed with
    /// counters 0x00112233, 0x00112234, 0x00112232, 0xFFFFFFFF and 0.
    static let counter0x00112233 = "41 e445f3c9962b 33221100 6c7c4519"
    static let counter0x00112234 = "41 3e932cc7175f 34221100 553876af"
    static let counter0x00112232 = "41 723d3035fb88 32221100 9e7414c0"
    static let counterMax = "41 ba0db07aeef6 ffffffff 21fd4600"
    static let counterZero = "41 de40b50e6766 00000000 d7cb95de"

    func decode(_ hex: String, _ replay: inout ReplayGuard) throws(AdvertisementError) -> AdvertisementPayload {
        try Advertised.decoder.decode(
            Advertised.bytes(hex), from: .bthome, address: Advertised.address(Self.address),
            key: Advertised.key(Self.key), replayGuard: &replay)
    }

    @Test func aCounterThatGoesBackIsRefusedAsReplayed() throws {
        var replay = ReplayGuard()
        #expect(try decode(Self.counter0x00112233, &replay).counter == 0x0011_2233)
        #expect(try decode(Self.counter0x00112234, &replay).counter == 0x0011_2234)
        let replayed = Advertised.failure(
            Self.counter0x00112232, from: .bthome, address: Self.address, key: Self.key, replay: &replay)
        #expect(replayed?.code == .replayed)
        #expect(
            replayed?.message
                == "BTHome from 54:48:E6:8F:80:A5: counter 1122866 is below the last accepted 1122868 (and not below "
                + "100, so not a restart): an old advertisement sent again")
        // A refused advertisement leaves the guard where it was; so does one that does not authenticate.
        #expect(replay.lastCounter == 0x0011_2234)
        let forged = Advertised.failure(
            "41 e445f3c9962b ffffff7f 6c7c4519", from: .bthome, address: Self.address, key: Self.key, replay: &replay)
        #expect(forged?.code == .authenticationFailed)
        #expect(replay.lastCounter == 0x0011_2234)
        // The old advertisement itself, sent again after a newer one.
        #expect(
            Advertised.failure(
                Self.counter0x00112233, from: .bthome, address: Self.address, key: Self.key, replay: &replay)?.code
                == .replayed)
    }

    @Test func theSameCounterAgainIsARepeatNotAReplay() throws {
        var replay = ReplayGuard()
        let first = try decode(Self.counter0x00112233, &replay)
        let again = try decode(Self.counter0x00112233, &replay)
        #expect(!first.isRepeat)
        #expect(again.isRepeat)
        #expect(again.readings == first.readings)
    }

    @Test func aCounterBelowOneHundredIsADeviceThatRestarted() throws {
        var replay = ReplayGuard()
        #expect(try decode(Self.counterMax, &replay).counter == 0xFFFF_FFFF)
        let restarted = try decode(Self.counterZero, &replay)
        #expect(restarted.counter == 0)
        #expect(
            restarted.readings == [
                reading("temperature", .number(25.07), "°C"), reading("humidity", .number(50.55), "%"),
            ])
        #expect(replay.lastCounter == 0)
    }

    @Test func resettingTheGuardAcceptsAnyCounterOnce() throws {
        var replay = ReplayGuard()
        _ = try decode(Self.counter0x00112234, &replay)
        #expect(throws: AdvertisementError.self) { try decode(Self.counter0x00112232, &replay) }
        replay.reset()
        #expect(try decode(Self.counter0x00112232, &replay).counter == 0x0011_2232)
    }

    /// The guard's rule on its own: (threshold, last, counter, verdict or nil for refused).
    @Test func theReplayRuleAsATable() throws {
        let cases: [(UInt32, UInt32?, UInt32, ReplayGuard.Verdict?)] = [
            (100, nil, 5_000, .fresh), (100, nil, 0, .fresh),
            (100, 5_000, 5_001, .fresh), (100, 5_000, .max, .fresh),
            (100, 5_000, 5_000, .repeated),
            (100, 5_000, 99, .restarted), (100, 5_000, 0, .restarted),
            (100, 5_000, 100, nil), (100, 5_000, 4_999, nil),
            (0, 5_000, 0, nil), (0, 5_000, 5_000, .repeated),
        ]
        for (threshold, last, counter, expected) in cases {
            var replay = ReplayGuard(restartThreshold: threshold)
            if let last { replay.record(last) }
            do {
                let verdict = try replay.check(counter, where: "test")
                #expect(verdict == expected, "threshold \(threshold), last \(String(describing: last)), \(counter)")
            } catch {
                #expect(expected == nil, "threshold \(threshold), last \(String(describing: last)), \(counter)")
                #expect(error.code == .replayed)
            }
        }
    }

    @Test func keysAndPlainAdvertisementsDoNotMix() {
        // [bthome-ble] test_encryption_downgrade_fails: a plain advertisement from a device that has a key.
        let downgrade = Advertised.failure(
            "40 04138a01", from: .bthome, address: "A4:C1:38:8D:18:B2", key: "814aac74c4f17b6c1581e1ab87816b99")
        #expect(downgrade?.code == .plainFromKeyedDevice)
        // [bthome-ble] test_encryption_key_needed: an encrypted one from a device without.
        let noKey = Advertised.failure(
            "41 d2fcefe52eb212d6 00112233 bc38c966", from: .bthome, address: "A4:C1:38:8D:18:B2")
        #expect(noKey?.code == .keyRequired)
        // [bthome-ble] test_too_short_encryption_advertisement.
        let short = Advertised.failure(
            "41 ba0db07aeef6 00", from: .bthome, address: Self.address, key: Self.key)
        #expect(short?.code == .truncated)
    }

    @Test func aKeyWithoutACipherSaysDecryptionIsUnavailable() {
        var replay = ReplayGuard()
        do {
            _ = try AdvertisementDecoder().decode(
                Advertised.bytes(Self.example), from: .bthome, address: Advertised.address(Self.address),
                key: Advertised.key(Self.key), replayGuard: &replay)
            Issue.record("decrypted without a cipher")
        } catch {
            #expect(error.code == .decryptionUnavailable)
        }
    }

    @Test func keysParseFromHexAndNeverPrint() throws {
        let key = try AdvertisementKey(hex: "231D39C1D7CC1AB1AEE224CD096DB932")
        #expect(key.bytes.count == 16)
        #expect("\(key)" == "key(16 bytes)")
        #expect(throws: AdvertisementError.self) { try AdvertisementKey(hex: "231d39") }
        #expect(throws: AdvertisementError.self) { try AdvertisementKey(hex: "231d39c1d7cc1ab1aee224cd096db93g") }
        do {
            _ = try AdvertisementKey(hex: "secret-secret")
        } catch {
            #expect(error.code == .invalidKey)
            #expect(!error.message.contains("secret"))
        }
    }
}
