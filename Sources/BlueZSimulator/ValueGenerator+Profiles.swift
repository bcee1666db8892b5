// Payloads of real sensors, encoded by hand (the simulator must not share a decoder with the clients it tests).
// Each varies a little with `sequence` (n = 0, 1, 2… per read or per notification) and stays decodable; value 0
// is exactly the configured reading, so a test can predict every byte.

extension ValueGenerator {
    /// Mi Flora (HHCCJCY01) real-time data, characteristic 0x1a01: 16 bytes — temperature sint16 LE in 0.1 °C at
    /// 0, byte 2 unused (0), light uint32 LE in lux at 3, moisture uint8 % at 7, conductivity uint16 LE in µS/cm
    /// at 8, bytes 10–15 zero. Value n: temperature + (n mod 5) × 0.1 °C, light + n lux, conductivity
    /// + (n mod 10) µS/cm, moisture as configured.
    ///
    /// Layout: emericg/WatchFlower `docs/flowercare-ble-api.md` ("Real-time data": 00-01 temperature in 0.1 °C,
    /// 03-06 lux, 07 moisture, 08-09 conductivity); signed temperature as WatchFlower's
    /// `src/devices/device_flowercare.cpp` reads it (an int16 cast).
    public static func miFloraRealTime(celsius: Double, lux: UInt32, moisture: UInt8, conductivity: UInt16)
        -> ValueGenerator
    {
        let tenths = Int((celsius * 10).rounded())
        return .custom { sequence in
            let temperature = UInt16(bitPattern: Int16(clamping: tenths + Int(sequence % 5)))
            let light = UInt32(clamping: UInt64(lux) + sequence)
            let fertility = UInt16(clamping: Int(conductivity) + Int(sequence % 10))
            return LittleEndian.bytes(temperature) + [0x00] + LittleEndian.bytes(light) + [moisture]
                + LittleEndian.bytes(fertility) + [UInt8](repeating: 0, count: 6)
        }
    }

    /// Mi Flora firmware and battery, characteristic 0x1a02: battery uint8 % at 0, byte 1 unused (0x2B as
    /// firmware 3.2.x sends it), the firmware version in ASCII from byte 2 ("3.2.1" → 7 bytes in all). Constant.
    ///
    /// Layout: emericg/WatchFlower `docs/flowercare-ble-api.md` ("Firmware and battery").
    public static func miFloraFirmwareAndBattery(battery: UInt8, firmware: String) -> ValueGenerator {
        .constant([battery, 0x2B] + Array(firmware.utf8))
    }

    /// LYWSD03MMC (stock firmware) reading, characteristic ebe0ccc1-…: 5 bytes — temperature sint16 LE in
    /// 0.01 °C, humidity uint8 %, battery voltage uint16 LE in mV. Value n: temperature + (n mod 10) × 0.01 °C,
    /// humidity + (n mod 3) % (at most 100), voltage as configured.
    ///
    /// Layout: uduncanu/lywsd03mmc `lywsd03mmc/lywsd03mmc.py` (`<hBh`: temperature / 100, humidity, voltage /
    /// 1000 V) and adafruit/Adafruit_CircuitPython_BLE_LYWSD03MMC `adafruit_ble_lywsd03mmc.py` (service
    /// ebe0ccb0-…, characteristic ebe0ccc1-…, `<hB` temperature / 100 and humidity).
    public static func lywsd03mmc(celsius: Double, humidity: UInt8, millivolts: UInt16) -> ValueGenerator {
        let hundredths = Int((celsius * 100).rounded())
        return .custom { sequence in
            let temperature = UInt16(bitPattern: Int16(clamping: hundredths + Int(sequence % 10)))
            let relative = UInt8(min(100, Int(humidity) + Int(sequence % 3)))
            return LittleEndian.bytes(temperature) + [relative] + LittleEndian.bytes(millivolts)
        }
    }

    /// Humidity 0x2A6F: uint16 LE in 0.01 %. Value n: humidity + (n mod 100) × 0.01 % (at most 100 %).
    public static func humidity(percent: Double) -> ValueGenerator {
        let hundredths = Int((percent * 100).rounded())
        return .custom { sequence in
            LittleEndian.bytes(UInt16(clamping: min(10_000, hundredths + Int(sequence % 100))))
        }
    }

    /// Heart Rate Measurement 0x2A37: flags 0x10 (heart rate as uint8, RR intervals present), the heart rate
    /// in beats per minute, one RR interval uint16 LE in 1/1024 s. Value n: bpm + (n mod 3), RR =
    /// round(60 × 1024 / that bpm); 72 bpm → `10 48 55 03`.
    public static func heartRate(bpm: UInt8) -> ValueGenerator {
        .custom { sequence in
            let rate = UInt8(clamping: max(1, Int(bpm) + Int(sequence % 3)))
            let interval = UInt16(clamping: Int((61_440 / Double(rate)).rounded()))
            return [0x10, rate] + LittleEndian.bytes(interval)
        }
    }

    /// Temperature Measurement 0x2A1C: flags 0x00 (Celsius, no time stamp, no type), then an IEEE-11073 32-bit
    /// FLOAT LE — mantissa sint24, exponent sint8 (−2). Value n: mantissa = round(°C × 100) + (n mod 5);
    /// 36.54 °C → `00 46 0E 00 FE`.
    public static func temperatureMeasurement(celsius: Double) -> ValueGenerator {
        let hundredths = Int((celsius * 100).rounded())
        return .custom { sequence in
            let mantissa = min(0x7F_FFFF, max(-0x80_0000, hundredths + Int(sequence % 5)))
            let bits = UInt32(bitPattern: Int32(mantissa)) & 0xFF_FFFF
            return [0x00, UInt8(bits & 0xff), UInt8((bits >> 8) & 0xff), UInt8(bits >> 16), UInt8(bitPattern: -2)]
        }
    }
}

/// Little-endian bytes of an integer (Bluetooth payloads are little-endian).
enum LittleEndian {
    static func bytes(_ value: UInt16) -> [UInt8] {
        [UInt8(value & 0xff), UInt8(value >> 8)]
    }

    static func bytes(_ value: UInt32) -> [UInt8] {
        [UInt8(value & 0xff), UInt8((value >> 8) & 0xff), UInt8((value >> 16) & 0xff), UInt8(value >> 24)]
    }
}
