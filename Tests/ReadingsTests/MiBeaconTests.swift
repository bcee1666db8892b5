import Testing

@testable import Readings

/// Xiaomi MiBeacon against the vectors of Home Assistant's xiaomi-ble (github.com/Bluetooth-Devices/xiaomi-ble,
/// `tests/test_parser.py`, the test named after each vector; bytes are the 0xFE95 service data, values the expected
/// `native_value`s). Where xiaomi-ble adjusts a value per model, the MiBeacon document's value is expected and the
/// difference is said next to the vector.
@Suite("MiBeacon")
struct MiBeaconTests {
    struct Vector: Sendable, CustomStringConvertible {
        var source: String
        var hex: String
        var address: String
        var key: String? = nil
        var readings: [Reading]
        var productID: UInt16
        var counter: UInt32? = nil

        var description: String { source }
    }

    static let micro = "\u{00B5}"

    static let vectors: [Vector] = [
        // xiaomi-ble also derives a voltage from the battery percentage; the advertisement carries none.
        Vector(
            source: "test_Xiaomi_LYWSDCGQ (v2)", hex: "5020 aa01 a3 bf2e3b342d58 0d1004b4009502 0a10013b",
            address: "58:2D:34:3B:2E:BF",
            readings: [
                reading("temperature", .number(18), "°C"), reading("humidity", .number(66.1), "%"),
                reading("battery", .unsigned(59), "%"),
            ], productID: 0x01AA),
        Vector(
            source: "test_Xiaomi_LYWSD03MMC (v3)", hex: "5030 5b05 03 4c94b438c1a4 0d10041001ea01",
            address: "A4:C1:38:B4:94:4C",
            readings: [reading("temperature", .number(27.2), "°C"), reading("humidity", .number(49), "%")],
            productID: 0x055B),
        Vector(
            source: "test_Xiaomi_ESM787_temperature_humidity (v5)", hex: "5059 db78 0d f4f80238c1a4 0d1004eb00e701",
            address: "A4:C1:38:02:F8:F4",
            readings: [reading("temperature", .number(23.5), "°C"), reading("humidity", .number(48.7), "%")],
            productID: 0x78DB),
        // The Mi Flora: capability byte 0x0D, one object per advertisement.
        Vector(
            source: "test_Xiaomi_HHCCJCY01", hex: "7120 9800 12 f34f6b8d7cc4 0d 041002c400",
            address: "C4:7C:8D:6B:4F:F3",
            readings: [reading("temperature", .number(19.6), "°C")], productID: 0x0098),
        Vector(
            source: "test_Xiaomi_HHCCJCY01_all_values (illuminance)", hex: "7120 9800 66 7a3e6a8d7cc4 0d 071003000000",
            address: "C4:7C:8D:6A:3E:7A", readings: [reading("illuminance", .unsigned(0), "lx")], productID: 0x0098),
        Vector(
            source: "test_Xiaomi_HHCCJCY01_all_values (conductivity)", hex: "7120 9800 68 7a3e6a8d7cc4 0d 09100257 02",
            address: "C4:7C:8D:6A:3E:7A", readings: [reading("conductivity", .unsigned(599), micro + "S/cm")],
            productID: 0x0098),
        Vector(
            source: "test_Xiaomi_HHCCJCY01_all_values (moisture)", hex: "7120 9800 47 7a3e6a8d7cc4 0d 08100140",
            address: "C4:7C:8D:6A:3E:7A", readings: [reading("moisture", .unsigned(64), "%")], productID: 0x0098),
        Vector(
            source: "test_Xiaomi_HHCCJCY01_all_values (temperature)", hex: "7120 9800 69 7a3e6a8d7cc4 0d 041002f400",
            address: "C4:7C:8D:6A:3E:7A", readings: [reading("temperature", .number(24.4), "°C")], productID: 0x0098),
        Vector(
            source: "test_Xiaomi_GCLS002", hex: "7120 bc03 cd 3e596d8d7cc4 0d 0410023c01", address: "C4:7C:8D:6D:59:3E",
            readings: [reading("temperature", .number(31.6), "°C")], productID: 0x03BC),
        Vector(
            source: "test_Xiaomi_HHCCPOT002", hex: "7120 5d01 01 5d01008d7cc4 0d 08100140 0910025702",
            address: "C4:7C:8D:00:01:5D",
            readings: [
                reading("moisture", .unsigned(64), "%"), reading("conductivity", .unsigned(599), micro + "S/cm"),
            ],
            productID: 0x015D),
        Vector(
            source: "test_Xiaomi_JQJCY01YM1", hex: "5040 df02 01 df02008d7cc4 10 10 027d00",
            address: "C4:7C:8D:00:02:DF",
            readings: [reading("formaldehyde", .number(1.25), "mg/m³")], productID: 0x02DF),
        Vector(
            source: "test_Xiaomi_WX08ZM", hex: "5040 0a04 01 0a04008d7cc4 1310015a", address: "C4:7C:8D:00:04:0A",
            readings: [reading("consumable", .unsigned(90), "%")], productID: 0x040A),
        // xiaomi-ble: opening true.
        Vector(
            source: "test_Xiaomi_CGH1", hex: "5040 d603 01 d6030a38c1a4 19100100", address: "A4:C1:38:0A:03:D6",
            readings: [reading("door", .text("open"))], productID: 0x03D6),
        // xiaomi-ble: motion, and light on for this model (100 lx or more).
        Vector(
            source: "test_Xiaomi_MJYD02YL", hex: "5040 f607 01 01f60738c1a4 0f0003640000", address: "A4:C1:38:07:F6:01",
            readings: [reading("motion", .boolean(true)), reading("illuminance", .unsigned(100), "lx")],
            productID: 0x07F6),
        // Encrypted, MiBeacon 5.
        Vector(
            source: "test_Xiaomi_CGG1", hex: "5858 480b 68 5f12342d585a 0b1841e2aa 000e00 a4964fb5",
            address: "5A:58:2D:34:12:5F", key: "814aac74c4f17b6c1581e1ab87816b99",
            readings: [reading("humidity", .number(59.6), "%")], productID: 0x0B48, counter: 0x000E_0068),
        // xiaomi-ble rounds this model's humidity down to whole percent (46); the object says 467, 46.7 %.
        Vector(
            source: "test_Xiaomi_LYWSD03MMC_encrypted", hex: "5858 5b05 50 f4830238c1a4 95ef58763c 260000 97e2abb5",
            address: "A4:C1:38:02:83:F4", key: "e9ea895fac7cca6d30532432a516f3a8",
            readings: [reading("humidity", .number(46.7), "%")], productID: 0x055B, counter: 0x2650),
        Vector(
            source: "test_Xiaomi_CGDK2", hex: "5858 6f06 07 892012342d58 5f176dd54f 020000 2fa453fa",
            address: "58:2D:34:12:20:89", key: "a3bfe9853dd85a620debe3620caaa351",
            readings: [reading("temperature", .number(22.6), "°C")], productID: 0x066F, counter: 0x0207),
        Vector(
            source: "test_Xiaomi_XMWSDJ04MMC (no address)", hex: "4859 0312 a4 1b776e7c96add7 000000 f2bf545b",
            address: "2C:11:65:25:70:04", key: "b2cf9a553d53571b5657defd582d676e",
            readings: [reading("humidity", .number(45), "%")], productID: 0x1203, counter: 0xA4),
        Vector(
            source: "test_Xiaomi_LYWSD02MMC", hex: "5858 e416 2c 84535638c1a4 2b6ef2e9 120000 6c884d9e",
            address: "A4:C1:38:56:53:84", key: "a115210eed7a88e50ad52662e732a9fb",
            readings: [reading("humidity", .unsigned(58), "%")], productID: 0x16E4, counter: 0x122C),
        Vector(
            source: "test_Xiaomi_LYWSD02MMC_v2_temperature", hex: "4858 4225 29 202d8c7a76b756 a82a00 78b8224e",
            address: "A4:C1:38:0E:FD:78", key: "19b1c678ab0a8bc3dc77765f059188d4",
            readings: [reading("temperature", .number(26.1), "°C")], productID: 0x2542, counter: 0x2A_A829),
        Vector(
            source: "test_Xiaomi_LYWSD02MMC_v2_humidity", hex: "5858 4225 88 78fd0e38c1a4 05f6538a a72a00 62b1a966",
            address: "A4:C1:38:0E:FD:78", key: "19b1c678ab0a8bc3dc77765f059188d4",
            readings: [reading("humidity", .unsigned(38), "%")], productID: 0x2542, counter: 0x2A_A788),
        Vector(
            source: "test_Xiaomi_MJWSD06MMC_temperature", hex: "4859 b555 3a 8699bda053448f 120000 5b046d6a",
            address: "A4:C1:38:80:15:07", key: "4d8f1373fb4d3bab557d0ebd1c78f8c4",
            readings: [reading("temperature", .number(25.2), "°C")], productID: 0x55B5, counter: 0x123A),
        Vector(
            source: "test_Xiaomi_MJWSD06MMC_humidity", hex: "5859 b555 34 07158038c1a4 bcc73298 0e0000 66960f10",
            address: "A4:C1:38:80:15:07", key: "4d8f1373fb4d3bab557d0ebd1c78f8c4",
            readings: [reading("humidity", .unsigned(39), "%")], productID: 0x55B5, counter: 0x0E34),
        Vector(
            source: "test_Xiaomi_CGDK3", hex: "4858 594f ef 546f0e74507293 210100 38d74333",
            address: "58:2D:34:87:94:0C",
            key: "872ea1bb02ba9713e885cb054c537368", readings: [reading("temperature", .number(23.8), "°C")],
            productID: 0x4F59, counter: 0x0001_21EF),
        // xiaomi-ble: opening true and "door left open".
        Vector(
            source: "test_Xiaomi_MCCGQ02HL", hex: "5858 8b09 a3 ae2181ecaae4 0e2c553c 040000 d28a500c",
            address: "E4:AA:EC:81:21:AE", key: "017e52d2684779298709b117c0a75a7b",
            readings: [reading("door", .text("not_closed_after_timeout"))], productID: 0x098B, counter: 0x04A3),
        // xiaomi-ble: smoke true.
        Vector(
            source: "test_Xiaomi_JTYJGD03MI_smoke", hex: "5859 9709 66 bc9ce344ef54 01081205 000000 715ebe90",
            address: "54:EF:44:E3:9C:BC", key: "5b51a7c91cde6707c9ef18dfda143a58",
            readings: [reading("smoke", .text("fire_alarm"))], productID: 0x0997, counter: 0x66),
    ]

    @Test(arguments: vectors)
    func vectorsDecodeToTheirPublishedValues(_ vector: Vector) throws {
        let payload = try Advertised.decode(vector.hex, from: .mibeacon, address: vector.address, key: vector.key)
        #expect(payload.readings == vector.readings)
        #expect(payload.productID == vector.productID)
        #expect(payload.isEncrypted == (vector.key != nil))
        #expect(payload.counter == vector.counter)
        #expect(payload.packetID == UInt32(Advertised.bytes(vector.hex)[4]))
        #expect(payload.issues.isEmpty)
    }

    @Test func aWrongKeyIsATypedError() {
        // test_bindkey_wrong: an RTCGQ02LM with another device's key.
        let error = Advertised.failure(
            "5859 8d0a 17 0fc4e044ef54 7cc27a5c03a1 000000 790df258", from: .mibeacon, address: "54:EF:44:E0:C4:0F",
            key: "814aac74c4f17b6c1581e1ab87816b99")
        #expect(error?.code == .authenticationFailed)
        // test_Xiaomi_CGG1 with the LYWSD03MMC's key.
        #expect(
            Advertised.failure(
                "5858480b685f12342d585a0b1841e2aa000e00a4964fb5", from: .mibeacon, address: "5A:58:2D:34:12:5F",
                key: "e9ea895fac7cca6d30532432a516f3a8")?.code == .authenticationFailed)
    }

    @Test func aReplayedCounterIsRefused() throws {
        // test_Xiaomi_LYWSD02MMC_v2_temperature (counter 0x2AA829), then _humidity (0x2AA788): older, refused.
        let address = Advertised.address("A4:C1:38:0E:FD:78")
        let key = Advertised.key("19b1c678ab0a8bc3dc77765f059188d4")
        var replay = ReplayGuard()
        let newer = Advertised.bytes("4858 4225 29 202d8c7a76b756 a82a00 78b8224e")
        let older = Advertised.bytes("5858 4225 88 78fd0e38c1a4 05f6538a a72a00 62b1a966")
        #expect(
            try Advertised.decoder.decode(newer, from: .mibeacon, address: address, key: key, replayGuard: &replay)
                .counter == 0x2A_A829)
        do {
            _ = try Advertised.decoder.decode(older, from: .mibeacon, address: address, key: key, replayGuard: &replay)
            Issue.record("the older counter was accepted")
        } catch {
            #expect(error.code == .replayed)
            #expect(
                error.message.hasPrefix(
                    "MiBeacon from A4:C1:38:0E:FD:78: counter 2795400 is below the last accepted 2795561"))
        }
        let again = try Advertised.decoder.decode(
            newer, from: .mibeacon, address: address, key: key, replayGuard: &replay)
        #expect(again.isRepeat)
    }

    @Test func keysAndPlainAdvertisementsDoNotMix() {
        // test_encryption_needs_v5: encrypted, no key.
        #expect(
            Advertised.failure(
                "5858480b685f12342d585a0b1841e2aa000e00a4964fb5", from: .mibeacon, address: "5A:58:2D:34:12:5F")?
                .code == .keyRequired)
        // test_Xiaomi_LYWSD03MMC, plain, from a device given a key.
        #expect(
            Advertised.failure(
                "50305b05034c94b438c1a40d10041001ea01", from: .mibeacon, address: "A4:C1:38:B4:94:4C",
                key: "e9ea895fac7cca6d30532432a516f3a8")?.code == .plainFromKeyedDevice)
    }

    @Test func versionThreeEncryptionIsRefusedBecauseItHasNoTag() {
        // test_bindkey_wrong_legacy / test_encryption_needs_v2: a YLKG07YL, MiBeacon 3 encrypted.
        let error = Advertised.failure(
            "5830b603d28b98c54124f8c3491476757e00000099", from: .mibeacon, address: "F8:24:41:C5:98:8B",
            key: "b853075158487aa39a5b5ea900000000")
        #expect(error?.code == .unsupportedEncryption)
    }

    @Test func theHeaderIsCheckedBeforeAnythingIsRead() throws {
        // test_Xiaomi_LYWSDCGQ with another address than the one inside: refused.
        #expect(
            Advertised.failure(
                "5020aa01a3bf2e3b342d580d1004b40095020a10013b", from: .mibeacon, address: "58:2D:34:3B:2E:BE")?.code
                == .addressMismatch)
        // Version 1 (frame control 0x1050), a mesh frame (bit 7), too short.
        #expect(
            Advertised.failure("5010aa01a3", from: .mibeacon, address: "58:2D:34:3B:2E:BF")?.code == .unsupportedVersion
        )
        #expect(
            Advertised.failure("d020aa01a3", from: .mibeacon, address: "58:2D:34:3B:2E:BF")?.code == .unsupportedFormat)
        #expect(Advertised.failure("5020aa01", from: .mibeacon, address: "58:2D:34:3B:2E:BF")?.code == .truncated)
        // test_blank_advertisements_then_encrypted: no objects (bit 6 clear), nothing to read, not an error.
        let blank = try Advertised.decode("3058 5b05 02 483cd438c1a4 08", from: .mibeacon, address: "A4:C1:38:D4:3C:48")
        #expect(blank.readings.isEmpty)
        #expect(blank.productID == 0x055B)
    }

    @Test func unknownObjectsAreSkippedAndShortOnesSayWhy() throws {
        // test_Xiaomi_LYWSDCGQ with an unknown object 0x1234 between the two known ones.
        let payload = try Advertised.decode(
            "5020 aa01 a3 bf2e3b342d58 0d1004b4009502 34120201ff 0a10013b", from: .mibeacon,
            address: "58:2D:34:3B:2E:BF")
        #expect(payload.readings.map(\.name) == ["temperature", "humidity", "battery"])
        #expect(payload.issues.map(\.code) == [.unknownObject])
        // A temperature object of one byte.
        let short = try Advertised.decode(
            "5020 aa01 a3 bf2e3b342d58 041001b4", from: .mibeacon, address: "58:2D:34:3B:2E:BF")
        #expect(
            short.readings == [
                .failed(
                    "temperature", unit: "°C",
                    ReadingError(.payloadTooShort, "object 0x1004 at offset 11 has 1 byte, needs 2"))
            ])
        // Only an unknown object: nothing decoded, the error is thrown.
        #expect(
            Advertised.failure("5020 aa01 a3 bf2e3b342d58 34120201ff", from: .mibeacon, address: "58:2D:34:3B:2E:BF")?
                .code == .unknownObject)
    }
}
