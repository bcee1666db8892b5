/// The Xiaomi Mi Flora (HHCCJCY01, "Flower care") on-device history: the commands a client writes, and the
/// values it reads back, as pure functions. The transport (connecting, writing, reading) is the caller's.
///
/// The sensor records one entry per hour while nobody is connected. A download, on one connection:
///
/// 1. write ``enterHistoryMode`` (`A0 00 00`) to the history control characteristic 0x1a10;
/// 2. read the history data characteristic 0x1a11: the header, whose ``entryCount(header:)`` is the number of
///    stored entries;
/// 3. for each index i: write ``readEntry(_:)`` (`A1` + i as uint16 LE) to 0x1a10, then read 0x1a11: one
///    16-byte ``Entry``;
/// 4. read the device time characteristic 0x1a12 (``deviceTime(_:)``) and note the gateway's wall clock at that
///    read: ``DeviceClock`` turns each entry's timestamp into wall time;
/// 5. optionally write ``clearHistory`` (`A2 00 00`) to wipe the entries read. Nothing can bring them back.
///
/// The device's timestamps count seconds since its own epoch, the moment it was powered (a battery change
/// restarts it at 0), never Unix time: an entry's wall time is the gateway's wall time at the device-time read
/// minus the age of the entry on the device's clock.
///
/// Sources (public protocol write-ups, facts only, no code taken):
/// - emericg/WatchFlower, `docs/flowercare-ble-api.md`: the history service 0x1206 with 0x1a10 (control),
///   0x1a11 (data), 0x1a12 (device time); the commands `0xa00000`, `0xa1` + index ("entry 1's address
///   `0xa10100`, entry 16's `0xa11000`", so the index is little endian), `0xa20000`; the header ("00-01 uint16
///   number of stored historical records", example `2b007b04ba130800c815080000000000` = 43 entries); the entry
///   layout (example `70e72000eb00005a00000015b3000000`: 2156400 s, 23.5 °C, 90 lux, 21 %, 179 µS/cm); the
///   device time (example `09ef2000` = 2158345 s "since device epoch (boot)").
/// - open-homeautomation/miflora, `miflora/miflora_poller.py` (`fetch_history`, `_fetch_device_time`,
///   `HistoryEntry`): the same commands and the wall time `device_time + (wall_time - device_time_at_read)`;
///   entries of all `FF`, all `00`, or the stale `AA BB CC DD EE FF 99 88 77 66 …` are refused as invalid.
/// - vrachieru/xiaomi-flower-care-api (its README, "Historical data"), from which both of the above started.
///
/// Where the sources differ: miflora reads the light as 3 bytes (7–9, byte 10 unknown); WatchFlower as uint32
/// 7–10, as in the real-time data. Both agree below 16,777,216 lux, far above the sensor's range, so the uint32
/// reading is taken. miflora treats a negative temperature as one's complement; the real-time data is an int16
/// (WatchFlower), and so is this one (two's complement).
public enum MiFloraHistory {
    /// The history service.
    public static let service = "00001206-0000-1000-8000-00805f9b34fb"
    /// History control (write): where ``enterHistoryMode``, ``readEntry(_:)`` and ``clearHistory`` go.
    public static let controlCharacteristic = "00001a10-0000-1000-8000-00805f9b34fb"
    /// History data (read): the header after ``enterHistoryMode``, an entry after ``readEntry(_:)``.
    public static let dataCharacteristic = "00001a11-0000-1000-8000-00805f9b34fb"
    /// Device time (read): seconds since the device's epoch, uint32 LE (``deviceTime(_:)``).
    public static let deviceTimeCharacteristic = "00001a12-0000-1000-8000-00805f9b34fb"

    /// Switches the history data characteristic to the header (the entry count).
    public static let enterHistoryMode: [UInt8] = [0xA0, 0x00, 0x00]
    /// Marks the download successful: the device wipes its stored entries.
    public static let clearHistory: [UInt8] = [0xA2, 0x00, 0x00]

    /// Selects entry `index` (0 is the oldest) for the next read of the history data characteristic:
    /// `A1` then the index as uint16 little endian.
    public static func readEntry(_ index: UInt16) -> [UInt8] {
        [0xA1, UInt8(index & 0xff), UInt8(index >> 8)]
    }

    /// The size of the header and of an entry.
    public static let recordSize = 16
    /// The size of the device time.
    public static let deviceTimeSize = 4

    /// The number of stored entries in the header read after ``enterHistoryMode``: uint16 LE at 0. The other 14
    /// bytes have no known meaning and are not checked.
    ///
    /// - Throws: ``ReadingError`` `payloadTooShort` or `payloadTooLong` unless the header has 16 bytes;
    ///   `specialValue` for the stale payload a sensor answers when the mode write did not take.
    public static func entryCount(header bytes: [UInt8]) throws(ReadingError) -> Int {
        try requireSize(bytes, recordSize, "a Mi Flora history header")
        if isStale(bytes) {
            throw ReadingError(.specialValue, "the stale placeholder: the history mode write did not take")
        }
        return Int(UInt16(bytes[0]) | UInt16(bytes[1]) << 8)
    }

    /// Seconds since the device's epoch (its power-up), read from the device time characteristic: uint32 LE.
    ///
    /// - Throws: ``ReadingError`` `payloadTooShort` or `payloadTooLong` unless there are exactly 4 bytes.
    public static func deviceTime(_ bytes: [UInt8]) throws(ReadingError) -> UInt32 {
        try requireSize(bytes, deviceTimeSize, "a Mi Flora device time")
        return uint32(bytes, at: 0)
    }

    /// One hourly record.
    public struct Entry: Sendable, Hashable {
        /// When it was recorded: seconds since the device's epoch (``DeviceClock`` gives the wall time).
        public var deviceTimestamp: UInt32
        /// Temperature in 0.1 °C, signed.
        public var temperatureTenths: Int16
        /// Light in lux.
        public var light: UInt32
        /// Soil moisture in %.
        public var moisture: UInt8
        /// Soil conductivity ("fertility") in µS/cm.
        public var conductivity: UInt16

        /// Temperature in °C.
        public var temperature: Double { Double(temperatureTenths) / 10 }

        public init(
            deviceTimestamp: UInt32, temperatureTenths: Int16, light: UInt32, moisture: UInt8, conductivity: UInt16
        ) {
            self.deviceTimestamp = deviceTimestamp
            self.temperatureTenths = temperatureTenths
            self.light = light
            self.moisture = moisture
            self.conductivity = conductivity
        }

        /// Decodes the 16 bytes read after ``MiFloraHistory/readEntry(_:)``:
        ///
        /// | bytes | type | meaning |
        /// |---|---|---|
        /// | 0–3 | uint32 LE | timestamp, seconds since the device's epoch |
        /// | 4–5 | int16 LE | temperature, 0.1 °C |
        /// | 6 | | unknown |
        /// | 7–10 | uint32 LE | light, lux |
        /// | 11 | uint8 | soil moisture, % |
        /// | 12–13 | uint16 LE | soil conductivity, µS/cm |
        /// | 14–15 | | unknown |
        ///
        /// - Throws: ``ReadingError`` `payloadTooShort` or `payloadTooLong` unless there are 16 bytes;
        ///   `specialValue` for what sensors answer instead of an entry (all `FF`, all `00`, the stale
        ///   placeholder `AA BB CC …`): an index past the end, or a selection that did not take.
        public init(_ bytes: [UInt8]) throws(ReadingError) {
            try MiFloraHistory.requireSize(bytes, MiFloraHistory.recordSize, "a Mi Flora history entry")
            if bytes.allSatisfy({ $0 == 0xFF }) || bytes.allSatisfy({ $0 == 0x00 }) || MiFloraHistory.isStale(bytes) {
                throw ReadingError(.specialValue, "\(HexText.bytes(bytes)): not an entry (none at that index?)")
            }
            deviceTimestamp = MiFloraHistory.uint32(bytes, at: 0)
            temperatureTenths = Int16(bitPattern: UInt16(bytes[4]) | UInt16(bytes[5]) << 8)
            light = MiFloraHistory.uint32(bytes, at: 7)
            moisture = bytes[11]
            conductivity = UInt16(bytes[12]) | UInt16(bytes[13]) << 8
        }
    }

    /// The device's clock tied to the gateway's: the device time read (``MiFloraHistory/deviceTime(_:)``) and
    /// the gateway's wall clock when it was read (the middle of the read, for the best estimate).
    public struct DeviceClock: Sendable, Hashable {
        /// Seconds since the device's epoch, as read.
        public var deviceNow: UInt32
        /// The gateway's wall clock at that read, in seconds since the Unix epoch.
        public var gatewayWallAtRead: Double

        public init(deviceNow: UInt32, gatewayWallAtRead: Double) {
            self.deviceNow = deviceNow
            self.gatewayWallAtRead = gatewayWallAtRead
        }

        /// The wall time (seconds since the Unix epoch) of a device timestamp:
        /// `gatewayWallAtRead - (deviceNow - deviceTimestamp)`. A timestamp after `deviceNow` (a clock read
        /// before the entry was recorded) lands after `gatewayWallAtRead`, by the same arithmetic.
        public func wallTime(ofDeviceTimestamp deviceTimestamp: UInt32) -> Double {
            gatewayWallAtRead - Double(Int64(deviceNow) - Int64(deviceTimestamp))
        }

        /// The wall time of `entry` (``wallTime(ofDeviceTimestamp:)``).
        public func wallTime(of entry: Entry) -> Double {
            wallTime(ofDeviceTimestamp: entry.deviceTimestamp)
        }

        /// The device's epoch (its power-up) in wall time.
        public var epoch: Double { wallTime(ofDeviceTimestamp: 0) }
    }

    /// Whether `bytes` is the placeholder a Mi Flora answers on a data characteristic before the mode write that
    /// selects its content: `AA BB CC DD EE FF 99 88 77 66`, then `55 44 33 22 11 10` in
    /// open-homeautomation/miflora's `_INVALID_HISTORY_DATA` but zeros in other captures (the project's
    /// `mi-flora.yaml`), so only the first ten bytes are compared.
    static func isStale(_ bytes: [UInt8]) -> Bool {
        bytes.starts(with: [0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF, 0x99, 0x88, 0x77, 0x66])
    }

    static func requireSize(_ bytes: [UInt8], _ size: Int, _ what: String) throws(ReadingError) {
        if bytes.count < size { throw .payloadTooShort(needs: size, at: 0, has: bytes.count) }
        if bytes.count > size {
            throw ReadingError(.payloadTooLong, "\(what) has \(size) bytes, payload has \(bytes.count)")
        }
    }

    static func uint32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16
            | UInt32(bytes[offset + 3]) << 24
    }
}
