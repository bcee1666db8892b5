// GATT services of real sensor profiles, for testing decoders and device profiles end to end. The payloads and
// how they vary are documented on the ValueGenerator presets (ValueGenerator+Profiles.swift).

extension SimulatedService {
    /// The Mi Flora (HHCCJCY01) data service 0x1204, as the real one behaves:
    /// - 0x1a00 "mode" (read, write): `00 00` until a client writes `A0 1F`, which switches 0x1a01 to real-time
    ///   data; the sensor forgets it when the link drops.
    /// - 0x1a01 "real-time data" (read): 16 bytes (`ValueGenerator.miFloraRealTime`) after the mode write on
    ///   the current connection; before it the stale `AA BB CC DD EE FF 99 88 77 66 00 00 00 00 00 00`.
    /// - 0x1a02 "firmware and battery" (read): `ValueGenerator.miFloraFirmwareAndBattery`.
    ///
    /// Sources: handles, UUIDs and the A0 1F write: emericg/WatchFlower `docs/flowercare-ble-api.md` and
    /// https://github.com/ChrisScheffler/miflora/wiki/Worklog ("write the magic bytes 0xa01f to … 1a00 in order
    /// to read data from … 1a01"); the stale payload: emericg/WatchFlower `src/devices/device_flowercare.cpp`
    /// (a first read may answer `aa bb cc dd ee ff 99 88 77 66…` until the mode write), and an ESP32 Flower Care
    /// README (repository not identified by the index searched) giving the full 16 bytes, zeros after `66`, and
    /// `00 00` as the mode characteristic's value before the write.
    public static func miFloraData(
        celsius: Double = 23.4, lux: UInt32 = 1_234, moisture: UInt8 = 41, conductivity: UInt16 = 567,
        battery: UInt8 = 97, firmware: String = "3.2.1"
    ) -> SimulatedService {
        SimulatedService(uuid: SimulatedUUID.miFloraDataService, characteristics: [
            SimulatedCharacteristic(
                uuid: SimulatedUUID.miFloraMode, flags: ["read", "write"], value: .constant([0x00, 0x00]),
                forgetsWritesOnDisconnect: true),
            SimulatedCharacteristic(
                uuid: SimulatedUUID.miFloraRealTimeData, flags: ["read"],
                value: .miFloraRealTime(celsius: celsius, lux: lux, moisture: moisture, conductivity: conductivity),
                requiredWrite: .init(
                    characteristic: SimulatedUUID.miFloraMode, bytes: SimulatedService.miFloraRealTimeMode,
                    placeholder: SimulatedService.miFloraStalePayload)),
            SimulatedCharacteristic(
                uuid: SimulatedUUID.miFloraFirmwareAndBattery, flags: ["read"],
                value: .miFloraFirmwareAndBattery(battery: battery, firmware: firmware)),
        ])
    }

    /// What a client writes to the Mi Flora's 0x1a00 to get real-time data.
    public static let miFloraRealTimeMode: [UInt8] = [0xA0, 0x1F]
    /// What the Mi Flora's 0x1a01 answers before that write.
    public static let miFloraStalePayload: [UInt8] = [
        0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF, 0x99, 0x88, 0x77, 0x66, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ]

    /// The Mi Flora (HHCCJCY01) history service 0x1206, holding `history` (`SimulatedHistory`):
    /// - 0x1a10 "history control" (read, write): selects what 0x1a11 answers, for the current connection only
    ///   (the sensor forgets it when the link drops, as 0x1a00): `A0 00 00` the header, `A1` + index uint16 LE
    ///   that entry (0 the oldest); `A2 00 00` wipes the stored entries.
    /// - 0x1a11 "history data" (read), 16 bytes: after `A0 00 00` the entry count uint16 LE and 14 zeros; after
    ///   `A1 i` entry i (`SimulatedHistory.Entry.bytes`), or 16 × `FF` past the last; before any selection on
    ///   the link, the stale `AA BB CC DD EE FF 99 88 77 66 00…` of 0x1a01.
    /// - 0x1a12 "device time" (read): seconds since the device was powered, uint32 LE, running in real time.
    ///
    /// Sources: emericg/WatchFlower `docs/flowercare-ble-api.md` ("Historical data": the service, the three
    /// characteristics, the commands, the header, the entry layout, the device time "seconds since device
    /// epoch (boot)"); open-homeautomation/miflora `miflora/miflora_poller.py` (`fetch_history`, `clear_history`,
    /// `_INVALID_HISTORY_DATA`: all `FF` among the answers that are no entry). What 0x1a11 answers before a
    /// selection, and past the last entry, is not documented beyond that list: the simulator's choice.
    public static func miFloraHistory(_ history: SimulatedHistory = SimulatedHistory()) -> SimulatedService {
        var control = SimulatedCharacteristic(
            uuid: SimulatedUUID.miFloraHistoryControl, flags: ["read", "write"], value: .constant([0x00, 0x00, 0x00]),
            forgetsWritesOnDisconnect: true)
        control.role = .miFloraHistoryControl
        var data = SimulatedCharacteristic(
            uuid: SimulatedUUID.miFloraHistoryData, flags: ["read"], value: .constant(miFloraHistoryPlaceholder))
        data.role = .miFloraHistoryData(history)
        var time = SimulatedCharacteristic(
            uuid: SimulatedUUID.miFloraDeviceTime, flags: ["read"], value: .constant([0x00, 0x00, 0x00, 0x00]))
        time.role = .miFloraDeviceTime
        return SimulatedService(uuid: SimulatedUUID.miFloraHistoryService, characteristics: [control, data, time])
    }

    /// The LYWSD03MMC (stock firmware) data service ebe0ccb0-… with its reading ebe0ccc1-… (read, notify;
    /// `ValueGenerator.lywsd03mmc`) and its clock ebe0ccb7-… (read, write). The real sensor notifies every few
    /// seconds; `notifyInterval` sets the pace.
    ///
    /// The clock: Unix time uint32 LE, then the time zone offset int8 in hours (5 bytes read; a write of 4 or 5
    /// bytes sets it, another size is refused with ATT error 0x0D). It starts at `clockStart` (default
    /// 2000-01-01T00:00:00Z, a clock nobody set) when the simulator does and runs in real time. On the real
    /// sensor the clock comes before the reading (handles 0x20 and 0x33); here it comes after, so that the
    /// reading keeps the handle it had before the clock was simulated.
    ///
    /// Sources: h4/lywsd02 `lywsd02/client.py` (`UUID_TIME` ebe0ccb7-…, "5 or 4 bytes, READ WRITE",
    /// `struct.pack('Ib', timestamp, tz_offset)`), which uduncanu/lywsd03mmc `lywsd03mmc/lywsd03mmc.py`
    /// extends for this sensor; keks51/lywsd03mmc-client `Readme.md` (service ebe0ccb0-…, characteristic
    /// ebe0ccb7-… "Read or write Timestamp" on a LYWSD03MMC); koenvervloesem/bluetooth-clocks
    /// `src/bluetooth_clocks/devices/xiaomi.py` (`<Lb`, time then offset in hours).
    public static func lywsd03mmc(
        celsius: Double = 22.51, humidity: UInt8 = 48, millivolts: UInt16 = 2_981,
        notifyInterval: Duration = .seconds(1), clockStart: UInt32 = 946_684_800
    ) -> SimulatedService {
        var clock = SimulatedCharacteristic(
            uuid: SimulatedUUID.lywsd03mmcTime, flags: ["read", "write"], value: .constant([0, 0, 0, 0, 0]))
        clock.role = .clock(start: clockStart)
        return SimulatedService(uuid: SimulatedUUID.lywsd03mmcService, characteristics: [
            SimulatedCharacteristic(
                uuid: SimulatedUUID.lywsd03mmcReading, flags: ["read", "notify"],
                value: .lywsd03mmc(celsius: celsius, humidity: humidity, millivolts: millivolts),
                notifyInterval: notifyInterval),
            clock,
        ])
    }

    /// Environmental Sensing 0x181A with Temperature 0x2A6E (sint16 LE, 0.01 °C; negative values allowed:
    /// −7.25 °C is `2B FD`) and Humidity 0x2A6F (uint16 LE, 0.01 %), both read and notify.
    public static func environmentalSensing(celsius: Double, humidity: Double) -> SimulatedService {
        SimulatedService(uuid: "181A", characteristics: [
            SimulatedCharacteristic(uuid: "2A6E", flags: ["read", "notify"], value: .temperature(celsius: celsius)),
            SimulatedCharacteristic(uuid: "2A6F", flags: ["read", "notify"], value: .humidity(percent: humidity)),
        ])
    }

    /// A vendor service whose one characteristic (128-bit, read and notify) can only be decoded through its
    /// descriptors: a sint16 LE whose Characteristic Presentation Format 0x2904 says format sint16 (0x0E),
    /// exponent −2, unit degree Celsius (0x272F), namespace Bluetooth SIG (0x01), description 0x0000 — the 7
    /// bytes `0E FE 2F 27 01 00 00` — and a User Description 0x2901 "Probe temperature". Value n: the
    /// temperature + (n mod 100) × 0.01 °C, as `ValueGenerator.temperature`.
    public static func presentationFormatProbe(celsius: Double = -18.25) -> SimulatedService {
        SimulatedService(uuid: SimulatedUUID.probeService, characteristics: [
            SimulatedCharacteristic(
                uuid: SimulatedUUID.probeTemperature, flags: ["read", "notify"], value: .temperature(celsius: celsius),
                descriptors: [
                    .presentationFormat(format: .sint16, exponent: -2, unit: 0x272F),
                    .userDescription("Probe temperature"),
                ])
        ])
    }

    /// Heart Rate 0x180D: Heart Rate Measurement 0x2A37 (notify; `ValueGenerator.heartRate`) and Body Sensor
    /// Location 0x2A38 (read; 0x01 chest).
    public static func heartRate(bpm: UInt8 = 72, notifyInterval: Duration = .seconds(1)) -> SimulatedService {
        SimulatedService(uuid: "180D", characteristics: [
            SimulatedCharacteristic(
                uuid: "2A37", flags: ["notify"], value: .heartRate(bpm: bpm), notifyInterval: notifyInterval),
            SimulatedCharacteristic(uuid: "2A38", flags: ["read"], value: .constant([0x01])),
        ])
    }

    /// Health Thermometer 0x1809: Temperature Measurement 0x2A1C (indicate; `ValueGenerator.temperatureMeasurement`).
    /// bluetoothd confirms indications itself and hands them to clients as the same PropertiesChanged(Value) as
    /// notifications, so the simulator's notify path serves "indicate" as it is.
    public static func healthThermometer(celsius: Double = 36.54, notifyInterval: Duration = .seconds(1))
        -> SimulatedService
    {
        SimulatedService(uuid: "1809", characteristics: [
            SimulatedCharacteristic(
                uuid: "2A1C", flags: ["indicate"], value: .temperatureMeasurement(celsius: celsius),
                notifyInterval: notifyInterval)
        ])
    }
}
