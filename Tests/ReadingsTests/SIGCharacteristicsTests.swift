import Testing
@testable import Readings

@Suite("SIG single-value characteristics")
struct SIGCharacteristicsTests {
    enum Expected {
        case value(Reading.Value)
        case failure(ReadingError.Code, String)
        case valueWithRemark(Reading.Value, ReadingError.Code, String)
    }

    /// uuid, payload, reading name, unit, expectation.
    static let cases: [(UInt16, [UInt8], String, String?, Expected)] = [
        // Battery Level
        (0x2A19, [0x64], "battery", "%", .value(.unsigned(100))),
        (0x2A19, [0x00], "battery", "%", .value(.unsigned(0))),
        (0x2A19, [0x65], "battery", "%", .failure(.outOfRange, "101.0 % is outside the valid range 0.0…100.0 %")),
        (0x2A19, [0xFF], "battery", "%", .failure(.outOfRange, "255.0")),
        (0x2A19, [], "battery", "%", .failure(.payloadTooShort, "needs 1 byte at offset 0, payload has 0")),
        (0x2A19, [0x50, 0x01], "battery", "%", .value(.unsigned(80))),  // extension bytes ignored
        // Temperature
        (0x2A6E, [0xCE, 0xFF], "temperature", "°C", .value(.number(-0.5))),
        (0x2A6E, [0x6A, 0x08], "temperature", "°C", .value(.number(21.54))),
        (0x2A6E, [0xFF, 0x7F], "temperature", "°C", .value(.number(327.67))),
        (0x2A6E, [0x4D, 0x95], "temperature", "°C", .value(.number(-273.15))),
        (
            0x2A6E, [0x4C, 0x95], "temperature", "°C",
            .failure(.outOfRange, "-273.16 °C is outside the valid range -273.15…327.67 °C")
        ),
        (0x2A6E, [0x00, 0x80], "temperature", "°C", .failure(.specialValue, "0x8000: value is not known")),
        (0x2A6E, [0x00, 0x00], "temperature", "°C", .value(.number(0))),
        (0x2A6E, [0x01], "temperature", "°C", .failure(.payloadTooShort, "needs 2 bytes at offset 0, payload has 1")),
        (0x2A6E, [0x6A, 0x08, 0x99], "temperature", "°C", .value(.number(21.54))),
        // Humidity
        (0x2A6F, [0x10, 0x27], "humidity", "%", .value(.number(100))),
        (0x2A6F, [0x00, 0x00], "humidity", "%", .value(.number(0))),
        (0x2A6F, [0x11, 0x27], "humidity", "%", .failure(.outOfRange, "100.01 % is outside")),
        (0x2A6F, [0xFF, 0xFF], "humidity", "%", .failure(.specialValue, "0xFFFF: value is not known")),
        (0x2A6F, [0x10], "humidity", "%", .failure(.payloadTooShort, "needs 2 bytes at offset 0, payload has 1")),
        // Pressure
        (0x2A6D, [0x02, 0x76, 0x0F, 0x00], "pressure", "Pa", .value(.number(101_325))),
        (0x2A6D, [0xFF, 0xFF, 0xFF, 0xFF], "pressure", "Pa", .value(.number(429_496_729.5))),
        (0x2A6D, [0x03, 0x00, 0x00, 0x00], "pressure", "Pa", .value(.number(0.3))),
        (
            0x2A6D, [0x02, 0x76, 0x0F], "pressure", "Pa",
            .failure(.payloadTooShort, "needs 4 bytes at offset 0, payload has 3")
        ),
        // Elevation
        (0x2A6C, [0xFF, 0xFF, 0xFF], "elevation", "m", .value(.number(-0.01))),
        (0x2A6C, [0x00, 0x00, 0x80], "elevation", "m", .value(.number(-83_886.08))),
        (0x2A6C, [0xFF, 0xFF, 0x7F], "elevation", "m", .value(.number(83_886.07))),
        (
            0x2A6C, [0xFF, 0xFF], "elevation", "m",
            .failure(.payloadTooShort, "needs 3 bytes at offset 0, payload has 2")
        ),
        // UV Index
        (0x2A76, [0x0B], "uv_index", nil, .value(.unsigned(11))),
        (0x2A76, [0xFF], "uv_index", nil, .value(.unsigned(255))),
        (0x2A76, [], "uv_index", nil, .failure(.payloadTooShort, "needs 1 byte at offset 0, payload has 0")),
        // Irradiance
        (0x2A77, [0xE8, 0x03], "irradiance", "W/m²", .value(.number(100))),
        (0x2A77, [0xFF, 0xFF], "irradiance", "W/m²", .value(.number(6553.5))),
        (0x2A77, [0xE8], "irradiance", "W/m²", .failure(.payloadTooShort, "needs 2 bytes at offset 0, payload has 1")),
        // Illuminance
        (0x2AFB, [0x10, 0x27, 0x00], "illuminance", "lx", .value(.number(100))),
        (0x2AFB, [0xFE, 0xFF, 0xFF], "illuminance", "lx", .value(.number(167_772.14))),
        (0x2AFB, [0xFF, 0xFF, 0xFF], "illuminance", "lx", .failure(.specialValue, "0xFFFFFF: value is not known")),
        (
            0x2AFB, [0x10, 0x27], "illuminance", "lx",
            .failure(.payloadTooShort, "needs 3 bytes at offset 0, payload has 2")
        ),
        // Dew Point
        (0x2A7B, [0xF6], "dew_point", "°C", .value(.integer(-10))),
        (0x2A7B, [0x7F], "dew_point", "°C", .value(.integer(127))),
        (0x2A7B, [0x80], "dew_point", "°C", .value(.integer(-128))),
        (0x2A7B, [], "dew_point", "°C", .failure(.payloadTooShort, "needs 1 byte at offset 0, payload has 0")),
        // Wind
        (0x2A70, [0xE8, 0x03], "true_wind_speed", "m/s", .value(.number(10))),
        (0x2A72, [0x01, 0x00], "apparent_wind_speed", "m/s", .value(.number(0.01))),
        (0x2A71, [0x3F, 0x8C], "true_wind_direction", "°", .value(.number(359.03))),
        (0x2A73, [0x00, 0x00], "apparent_wind_direction", "°", .value(.number(0))),
        (0x2A73, [0x9F, 0x8C], "apparent_wind_direction", "°", .value(.number(359.99))),
        (
            0x2A71, [0xA0, 0x8C], "true_wind_direction", "°",
            .failure(.outOfRange, "360.0 ° is outside the valid range 0.0…359.99 °")
        ),
        (
            0x2A71, [0x3F], "true_wind_direction", "°",
            .failure(.payloadTooShort, "needs 2 bytes at offset 0, payload has 1")
        ),
        // CO2 and VOC
        (0x2B8C, [0xB0, 0x04], "co2", "ppm", .value(.unsigned(1200))),
        (0x2B8C, [0xFD, 0xFF], "co2", "ppm", .value(.unsigned(65533))),
        (
            0x2B8C, [0xFE, 0xFF], "co2", "ppm",
            .valueWithRemark(.unsigned(65534), .specialValue, "0xFFFE: value is 65534 or greater")
        ),
        (0x2B8C, [0xFF, 0xFF], "co2", "ppm", .failure(.specialValue, "0xFFFF: value is not known")),
        (0x2B8C, [0xB0], "co2", "ppm", .failure(.payloadTooShort, "needs 2 bytes at offset 0, payload has 1")),
        (0x2BE7, [0x00, 0x00], "voc", "ppb", .value(.unsigned(0))),
        (0x2BE7, [0xFE, 0xFF], "voc", "ppb", .valueWithRemark(.unsigned(65534), .specialValue, "65534 or greater")),
        (0x2BE7, [0xFF, 0xFF], "voc", "ppb", .failure(.specialValue, "0xFFFF: value is not known")),
        // Particulate matter: SFLOAT kg/m³ reported in µg/m³.
        (0x2BD6, [0x19, 0x80], "pm2_5", "µg/m³", .value(.number(250))),  // 25 × 10^-8 kg/m³
        (0x2BD5, [0x0C, 0x90], "pm1", "µg/m³", .value(.number(1200))),  // 12 × 10^-7 kg/m³
        (0x2BD7, [0x00, 0x00], "pm10", "µg/m³", .value(.number(0))),
        (0x2BD7, [0xFF, 0x07], "pm10", "µg/m³", .failure(.specialValue, "0x07FF: NaN")),
        (0x2BD6, [0x00, 0x08], "pm2_5", "µg/m³", .failure(.specialValue, "0x0800: NRes")),
        (0x2BD5, [0x19], "pm1", "µg/m³", .failure(.payloadTooShort, "needs 2 bytes at offset 0, payload has 1")),
        // Device Information strings
        (0x2A29, Array("Acme".utf8) + [0, 0, 0], "manufacturer", nil, .value(.text("Acme"))),
        (0x2A24, Array("KA-1".utf8), "model", nil, .value(.text("KA-1"))),
        (0x2A25, Array("0042".utf8) + [0], "serial_number", nil, .value(.text("0042"))),
        (0x2A26, Array("1.2.3".utf8), "firmware_revision", nil, .value(.text("1.2.3"))),
        (0x2A27, [], "hardware_revision", nil, .value(.text(""))),
        (
            0x2A28, [0xFF, 0xFE], "software_revision", nil,
            .failure(.invalidText, "2 bytes at offset 0 are not valid UTF-8")
        ),
    ]

    @Test func everyCase() {
        for (uuid, bytes, name, unit, expected) in Self.cases {
            guard let reading = Decode.single(uuid, bytes) else {
                Issue.record("0x\(String(uuid, radix: 16)) did not give exactly one reading")
                continue
            }
            let label = "0x\(String(uuid, radix: 16)) \(bytes)"
            #expect(reading.name == name, "\(label)")
            #expect(reading.unit == unit, "\(label)")
            switch expected {
            case .value(let value):
                #expect(reading.value == value, "\(label)")
                #expect(reading.error == nil, "\(label): \(String(describing: reading.error))")
            case .failure(let code, let message):
                #expect(reading.value == nil, "\(label)")
                #expect(reading.error?.code == code, "\(label)")
                #expect(
                    reading.error?.message.contains(message) == true, "\(label): \(String(describing: reading.error))")
            case .valueWithRemark(let value, let code, let message):
                #expect(reading.value == value, "\(label)")
                #expect(reading.error?.code == code, "\(label)")
                #expect(reading.error?.message.contains(message) == true, "\(label)")
            }
        }
    }

    @Test func everySingleValueEntryHasCases() {
        let covered = Set(Self.cases.map(\.0))
        for entry in SIGCharacteristics.simpleEntries {
            #expect(covered.contains(entry.uuid16), "\(entry.name) has no test case")
        }
    }

    @Test func tableIsConsistent() {
        var uuids: Set<UInt16> = []
        for entry in SIGCharacteristics.all {
            #expect(uuids.insert(entry.uuid16).inserted, "duplicate \(entry.uuid16)")
            #expect(Set(entry.readingNames).count == entry.readingNames.count, "\(entry.name) repeats a reading name")
            #expect(SIGCharacteristics.entry(entry.uuid16) == entry)
            for name in entry.readingNames {
                #expect(name == name.lowercased() && !name.contains(" "), "\(name) is not snake_case")
            }
        }
        #expect(SIGCharacteristics.entry(0x2A6E)?.name == "Temperature")
        #expect(SIGCharacteristics.entry(0x1234) == nil)
    }

    @Test func unknownUUIDIsATypedFailure() {
        let readings = Decode.sig(0x1234, [1, 2])
        #expect(readings.count == 1)
        #expect(readings.first?.error?.code == .unsupportedFormat)
        #expect(readings.first?.name == "characteristic_1234")
    }
}
