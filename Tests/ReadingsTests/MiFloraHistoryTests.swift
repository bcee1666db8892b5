import Testing

@testable import Readings

/// The Mi Flora history codec against the examples of emericg/WatchFlower `docs/flowercare-ble-api.md`
/// ("Historical data": device time `09ef2000`, entry count `2b007b04ba130800c815080000000000`, entry
/// `70e72000eb00005a00000015b3000000`, the addresses `0xa10000`, `0xa10100`, `0xa11000`) and the commands of
/// open-homeautomation/miflora `miflora/miflora_poller.py` (`_CMD_HISTORY_READ_INIT` `a0 00 00`,
/// `_CMD_HISTORY_READ_SUCCESS` `a2 00 00`, `_cmd_history_address`, `_INVALID_HISTORY_DATA`). Vectors not from
/// those sources are marked as constructed.
@Suite("Mi Flora history")
struct MiFloraHistoryTests {
    static func bytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.filter { !$0.isWhitespace })
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
    }

    @Test func theCommandsAreTheDocumentedBytes() {
        #expect(MiFloraHistory.enterHistoryMode == [0xA0, 0x00, 0x00])
        #expect(MiFloraHistory.clearHistory == [0xA2, 0x00, 0x00])
        // WatchFlower: entry 0 is 0xa10000, entry 1 0xa10100, entry 16 0xa11000 (the index little endian).
        #expect(MiFloraHistory.readEntry(0) == Self.bytes("a10000"))
        #expect(MiFloraHistory.readEntry(1) == Self.bytes("a10100"))
        #expect(MiFloraHistory.readEntry(16) == Self.bytes("a11000"))
        #expect(MiFloraHistory.readEntry(0x1234) == [0xA1, 0x34, 0x12], "constructed: both bytes of the index")
        #expect(MiFloraHistory.readEntry(.max) == [0xA1, 0xFF, 0xFF], "constructed")
    }

    @Test func theUUIDsAreTheHistoryServiceAndItsThreeCharacteristics() {
        #expect(MiFloraHistory.service == "00001206-0000-1000-8000-00805f9b34fb")
        #expect(MiFloraHistory.controlCharacteristic == "00001a10-0000-1000-8000-00805f9b34fb")
        #expect(MiFloraHistory.dataCharacteristic == "00001a11-0000-1000-8000-00805f9b34fb")
        #expect(MiFloraHistory.deviceTimeCharacteristic == "00001a12-0000-1000-8000-00805f9b34fb")
    }

    @Test func theHeaderCountsTheStoredEntries() throws {
        #expect(try MiFloraHistory.entryCount(header: Self.bytes("2b007b04ba130800c815080000000000")) == 43)
        #expect(try MiFloraHistory.entryCount(header: [0x2C, 0x01] + [UInt8](repeating: 0, count: 14)) == 300)
        #expect(try MiFloraHistory.entryCount(header: [0xFF, 0xFF] + [UInt8](repeating: 0, count: 14)) == 65_535)
        #expect(try MiFloraHistory.entryCount(header: [UInt8](repeating: 0, count: 16)) == 0, "an empty history")
    }

    @Test func anEntryDecodesToTheDocumentedValues() throws {
        let entry = try MiFloraHistory.Entry(Self.bytes("70e72000eb00005a00000015b3000000"))
        #expect(entry.deviceTimestamp == 2_156_400)
        #expect(entry.temperatureTenths == 235 && entry.temperature == 23.5)
        #expect(entry.light == 90)
        #expect(entry.moisture == 21)
        #expect(entry.conductivity == 179)
    }

    @Test func aFrostEntryIsNegativeAndAllFourLightBytesCount() throws {
        // Constructed: −5.5 °C (−55 = 0xFFC9), 100,000 lux (0x0186A0), 3 %, 1,000 µS/cm (0x03E8).
        let entry = try MiFloraHistory.Entry(Self.bytes("10203040 c9ff 00 a0860100 03 e803 0000"))
        #expect(entry.deviceTimestamp == 0x4030_2010)
        #expect(entry.temperature == -5.5)
        #expect(entry.light == 100_000)
        #expect(entry.moisture == 3 && entry.conductivity == 1_000)
    }

    @Test func theDeviceTimeCountsSecondsSinceTheDevicePoweredUp() throws {
        #expect(try MiFloraHistory.deviceTime(Self.bytes("09ef2000")) == 2_158_345)
        #expect(try MiFloraHistory.deviceTime([0xFF, 0xFF, 0xFF, 0xFF]) == .max, "constructed")
    }

    @Test func anEntryIsDatedByItsAgeOnTheDeviceClock() throws {
        // WatchFlower's device time and entry: the entry is 2158345 − 2156400 = 1945 s older than the read.
        let entry = try MiFloraHistory.Entry(Self.bytes("70e72000eb00005a00000015b3000000"))
        let clock = MiFloraHistory.DeviceClock(
            deviceNow: try MiFloraHistory.deviceTime(Self.bytes("09ef2000")), gatewayWallAtRead: 1_700_000_000.25)
        #expect(clock.wallTime(of: entry) == 1_700_000_000.25 - 1_945)
        #expect(clock.epoch == 1_700_000_000.25 - 2_158_345)
        #expect(clock.wallTime(ofDeviceTimestamp: 2_158_345) == 1_700_000_000.25)
        #expect(clock.wallTime(ofDeviceTimestamp: 2_158_355) == 1_700_000_010.25, "an entry after the read")
    }

    @Test func wrongLengthsAreTypedErrorsNotTraps() {
        let short = #expect(throws: ReadingError.self) {
            try MiFloraHistory.Entry([UInt8](repeating: 1, count: 15))
        }
        #expect(short?.code == .payloadTooShort)
        #expect(short?.message == "needs 16 bytes at offset 0, payload has 15")
        let long = #expect(throws: ReadingError.self) { try MiFloraHistory.Entry([UInt8](repeating: 1, count: 17)) }
        #expect(long?.code == .payloadTooLong)
        #expect(throws: ReadingError.self) { try MiFloraHistory.Entry([]) }
        let header = #expect(throws: ReadingError.self) { try MiFloraHistory.entryCount(header: [0x2B, 0x00]) }
        #expect(header?.code == .payloadTooShort)
        #expect(throws: ReadingError.self) { try MiFloraHistory.entryCount(header: [UInt8](repeating: 0, count: 20)) }
        let time = #expect(throws: ReadingError.self) { try MiFloraHistory.deviceTime([0x09, 0xEF, 0x20]) }
        #expect(time?.code == .payloadTooShort)
        let longTime = #expect(throws: ReadingError.self) {
            try MiFloraHistory.deviceTime([0x09, 0xEF, 0x20, 0x00, 0x00])
        }
        #expect(longTime?.code == .payloadTooLong)
    }

    @Test(arguments: [
        // open-homeautomation/miflora `_INVALID_HISTORY_DATA`: all FF, all 00, the stale placeholder.
        "ffffffffffffffffffffffffffffffff", "00000000000000000000000000000000", "aabbccddeeff99887766554433221110",
        // The stale placeholder as the project's mi-flora.yaml records it for 0x1a01: zeros after 66.
        "aabbccddeeff99887766000000000000",
    ])
    func whatASensorAnswersInsteadOfAnEntryIsRefused(hex: String) {
        let error = #expect(throws: ReadingError.self) { try MiFloraHistory.Entry(Self.bytes(hex)) }
        #expect(error?.code == .specialValue)
    }

    @Test func aHeaderReadBeforeTheModeWriteIsRefused() {
        let error = #expect(throws: ReadingError.self) {
            try MiFloraHistory.entryCount(header: Self.bytes("aabbccddeeff99887766000000000000"))
        }
        #expect(error?.code == .specialValue)
    }
}
