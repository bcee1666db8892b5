import Testing
@testable import Readings

@Suite("SIG compound characteristics")
struct CompoundCharacteristicsTests {
    static let timeStamp: [UInt8] = [0xE8, 0x07, 2, 29, 13, 45, 30]  // 2024-02-29T13:45:30
    static let float3654: [UInt8] = [0x46, 0x0E, 0x00, 0xFE]  // 36.54

    // MARK: Temperature Measurement

    @Test func temperatureMeasurementCelsiusAndFahrenheit() {
        let celsius = Decode.sig(0x2A1C, [0x00] + Self.float3654)
        #expect(celsius == [Reading(name: "temperature", value: .number(36.54), unit: "°C")])
        let fahrenheit = Decode.sig(0x2A1C, [0x01] + Self.float3654)
        #expect(fahrenheit == [Reading(name: "temperature", value: .number(36.54), unit: "°F")])
        #expect(Decode.sig(0x2A1E, [0x00] + Self.float3654) == celsius)  // Intermediate Temperature
    }

    @Test func temperatureMeasurementWithTimeStampAndType() {
        let readings = Decode.sig(0x2A1C, [0x06] + Self.float3654 + Self.timeStamp + [0x02])
        #expect(readings.map(\.name) == ["temperature", "time_stamp", "temperature_type"])
        #expect(Decode.named(readings, "time_stamp")?.value == .text("2024-02-29T13:45:30"))
        #expect(Decode.named(readings, "temperature_type")?.value == .text("body"))
        // Type only (no time stamp): the type follows the value directly.
        let typeOnly = Decode.sig(0x2A1C, [0x04] + Self.float3654 + [0x09])
        #expect(Decode.named(typeOnly, "temperature_type")?.value == .text("tympanum"))
    }

    @Test func temperatureMeasurementFailures() {
        // Reserved temperature type code.
        let reservedType = Decode.sig(0x2A1C, [0x04] + Self.float3654 + [0x0A])
        #expect(Decode.named(reservedType, "temperature_type")?.error?.code == .reservedValue)
        #expect(Decode.named(reservedType, "temperature_type")?.value == nil)
        #expect(
            Decode.named(Decode.sig(0x2A1C, [0x04] + Self.float3654 + [0x00]), "temperature_type")?.error?.code
                == .reservedValue)
        // Time stamp announced but missing.
        let short = Decode.sig(0x2A1C, [0x02] + Self.float3654)
        #expect(Decode.named(short, "temperature")?.value == .number(36.54))
        #expect(Decode.named(short, "time_stamp")?.error == .payloadTooShort(needs: 7, at: 5, has: 5))
        // Empty payload.
        #expect(
            Decode.sig(0x2A1C, []) == [.failed("temperature", unit: "°C", .payloadTooShort(needs: 1, at: 0, has: 0))])
        // Value cut short.
        #expect(
            Decode.sig(0x2A1C, [0x00, 0x46, 0x0E]).first?.error?.message == "needs 4 bytes at offset 1, payload has 3")
        // FLOAT NaN.
        let nan = Decode.sig(0x2A1C, [0x00, 0xFF, 0xFF, 0x7F, 0x00])
        #expect(nan.first?.error?.code == .specialValue)
        #expect(nan.first?.error?.message.contains("NaN") == true)
        // Unknown date.
        let unknownDate = Decode.sig(0x2A1C, [0x02] + Self.float3654 + [0, 0, 1, 1, 0, 0, 0])
        #expect(
            Decode.named(unknownDate, "time_stamp")?.error == ReadingError(.specialValue, "year 0: value is not known"))
    }

    @Test func temperatureMeasurementReservedFlags() {
        // Bit 3 reserved: the value (before any optional field) is still decoded; the flags are reported.
        let readings = Decode.sig(0x2A1C, [0x08] + Self.float3654)
        #expect(Decode.named(readings, "temperature")?.value == .number(36.54))
        #expect(Decode.named(readings, "flags")?.error?.code == .reservedFlag)
        #expect(Decode.named(readings, "flags")?.value == .unsigned(8))
        // With an optional field present its position is ambiguous: reported, not guessed.
        let ambiguous = Decode.sig(0x2A1C, [0x84] + Self.float3654 + [0x02])
        #expect(Decode.named(ambiguous, "temperature_type")?.error?.code == .reservedFlag)
        #expect(Decode.named(ambiguous, "temperature_type")?.value == nil)
    }

    // MARK: Heart Rate Measurement

    @Test func heartRateFormatsAndContact() {
        let small = Decode.sig(0x2A37, [0x00, 72])
        #expect(
            small == [
                Reading(name: "heart_rate", value: .unsigned(72), unit: "bpm"),
                Reading(name: "sensor_contact", value: .text("not_supported")),
            ])
        #expect(Decode.named(Decode.sig(0x2A37, [0x01, 0x2C, 0x01]), "heart_rate")?.value == .unsigned(300))
        #expect(Decode.named(Decode.sig(0x2A37, [0x06, 60]), "sensor_contact")?.value == .text("detected"))
        #expect(Decode.named(Decode.sig(0x2A37, [0x04, 60]), "sensor_contact")?.value == .text("not_detected"))
        #expect(Decode.named(Decode.sig(0x2A37, [0x02, 60]), "sensor_contact")?.value == .text("not_supported"))
    }

    @Test func heartRateEnergyAndRRIntervals() {
        let readings = Decode.sig(0x2A37, [0x18, 60, 0x10, 0x00, 0x00, 0x04, 0x00, 0x02, 0x01, 0x00])
        #expect(readings.map(\.name) == ["heart_rate", "sensor_contact", "energy_expended", "rr_intervals"])
        #expect(
            Decode.named(readings, "energy_expended")
                == Reading(name: "energy_expended", value: .number(16_000), unit: "J"))
        #expect(
            Decode.named(readings, "rr_intervals")
                == Reading(name: "rr_intervals", value: .numbers([1, 0.5, 1.0 / 1024]), unit: "s"))
    }

    @Test func heartRateFailures() {
        // Odd trailing RR byte.
        let odd = Decode.sig(0x2A37, [0x10, 60, 0x00, 0x04, 0x01])
        #expect(Decode.named(odd, "rr_intervals")?.error == .payloadTooShort(needs: 2, at: 4, has: 5))
        // RR announced, none present.
        #expect(Decode.named(Decode.sig(0x2A37, [0x10, 60]), "rr_intervals")?.error?.code == .payloadTooShort)
        // uint16 value cut short; energy after it cannot be read either.
        let short = Decode.sig(0x2A37, [0x09, 60])
        #expect(Decode.named(short, "heart_rate")?.error == .payloadTooShort(needs: 2, at: 1, has: 2))
        #expect(Decode.named(short, "energy_expended")?.error?.code == .payloadTooShort)
        #expect(Decode.sig(0x2A37, []).map(\.name) == ["heart_rate", "sensor_contact"])
        #expect(Decode.sig(0x2A37, []).allSatisfy { $0.error?.code == .payloadTooShort })
        // Reserved bit 5: heart rate kept, RR (optional, now ambiguous) refused, flags reported.
        let reserved = Decode.sig(0x2A37, [0x30, 60, 0x00, 0x04])
        #expect(Decode.named(reserved, "heart_rate")?.value == .unsigned(60))
        #expect(Decode.named(reserved, "rr_intervals")?.error?.code == .reservedFlag)
        #expect(Decode.named(reserved, "flags")?.error?.message.contains("0x20") == true)
    }

    // MARK: Weight Measurement

    @Test func weightSIAndImperial() {
        #expect(Decode.sig(0x2A9D, [0x00, 0x2A, 0x3A]) == [Reading(name: "weight", value: .number(74.45), unit: "kg")])
        #expect(Decode.sig(0x2A9D, [0x01, 0x2A, 0x3A]) == [Reading(name: "weight", value: .number(148.9), unit: "lb")])
        let unsuccessful = Decode.sig(0x2A9D, [0x00, 0xFF, 0xFF])
        #expect(unsuccessful.first?.error == ReadingError(.specialValue, "0xFFFF: measurement unsuccessful"))
    }

    @Test func weightWithEverything() {
        let readings = Decode.sig(0x2A9D, [0x0E, 0x2A, 0x3A] + Self.timeStamp + [3, 0xF1, 0x00, 0xD2, 0x06])
        #expect(readings.map(\.name) == ["weight", "time_stamp", "user_id", "bmi", "height"])
        #expect(Decode.named(readings, "user_id")?.value == .unsigned(3))
        #expect(Decode.named(readings, "bmi") == Reading(name: "bmi", value: .number(24.1), unit: "kg/m²"))
        #expect(Decode.named(readings, "height") == Reading(name: "height", value: .number(1.746), unit: "m"))
        let imperial = Decode.sig(0x2A9D, [0x09, 0x2A, 0x3A, 0xF1, 0x00, 0xBA, 0x02])
        #expect(Decode.named(imperial, "height") == Reading(name: "height", value: .number(69.8), unit: "in"))
        let unknownUser = Decode.sig(0x2A9D, [0x04, 0x2A, 0x3A, 0xFF])
        #expect(Decode.named(unknownUser, "user_id")?.error == ReadingError(.specialValue, "0xFF: unknown user"))
        let short = Decode.sig(0x2A9D, [0x08, 0x2A, 0x3A, 0xF1, 0x00, 0xD2])
        #expect(Decode.named(short, "height")?.error == .payloadTooShort(needs: 2, at: 5, has: 6))
        #expect(Decode.named(Decode.sig(0x2A9D, [0x10, 0x2A, 0x3A]), "flags")?.error?.code == .reservedFlag)
    }

    // MARK: Current Time and Date Time

    @Test func currentTime() {
        let readings = Decode.sig(0x2A2B, [0xE8, 0x07, 11, 24, 16, 5, 9, 2, 128, 0x03])
        #expect(
            readings == [
                Reading(name: "current_time", value: .text("2024-11-24T16:05:09")),
                Reading(name: "day_of_week", value: .text("tuesday")),
                Reading(name: "fraction_of_second", value: .number(0.5), unit: "s"),
                Reading(name: "adjust_reason", value: .text("manual_time_update,external_reference_time_update")),
            ])
        let reservedReason = Decode.sig(0x2A2B, [0xE8, 0x07, 11, 24, 16, 5, 9, 2, 0, 0x10])
        #expect(Decode.named(reservedReason, "adjust_reason")?.value == .text("none"))
        #expect(Decode.named(reservedReason, "adjust_reason")?.error?.code == .reservedFlag)
        let unknownDay = Decode.sig(0x2A2B, [0xE8, 0x07, 11, 24, 16, 5, 9, 0, 0, 0])
        #expect(Decode.named(unknownDay, "day_of_week")?.error?.code == .specialValue)
        #expect(
            Decode.named(Decode.sig(0x2A2B, [0xE8, 0x07, 11, 24, 16, 5, 9, 8, 0, 0]), "day_of_week")?.error?.code
                == .reservedValue)
        let short = Decode.sig(0x2A2B, [0xE8, 0x07, 11, 24, 16, 5, 9, 2, 128])
        #expect(Decode.named(short, "adjust_reason")?.error == .payloadTooShort(needs: 1, at: 9, has: 9))
        #expect(Decode.sig(0x2A2B, [0xE8, 0x07, 11]).allSatisfy { $0.error?.code == .payloadTooShort })
    }

    @Test func dateTimeValidity() {
        let cases: [([UInt8], ReadingError.Code?, String)] = [
            ([0xE8, 0x07, 2, 29, 0, 0, 0], nil, "2024-02-29T00:00:00"),
            ([0x2E, 0x06, 1, 1, 23, 59, 59], nil, "1582-01-01T23:59:59"),
            ([0x0F, 0x27, 12, 31, 0, 0, 0], nil, "9999-12-31T00:00:00"),
            ([0xE9, 0x07, 2, 29, 0, 0, 0], .outOfRange, "day 29 is outside 1…28 for 2025-02"),
            ([0xD0, 0x07, 2, 29, 0, 0, 0], nil, "2000-02-29T00:00:00"),
            ([0x6C, 0x07, 2, 29, 0, 0, 0], .outOfRange, "1900-02"),
            ([0xE8, 0x07, 4, 31, 0, 0, 0], .outOfRange, "day 31"),
            ([0xE8, 0x07, 13, 1, 0, 0, 0], .outOfRange, "month 13 is outside 1…12"),
            ([0xE8, 0x07, 1, 1, 24, 0, 0], .outOfRange, "hours 24"),
            ([0xE8, 0x07, 1, 1, 0, 60, 0], .outOfRange, "minutes 60"),
            ([0xE8, 0x07, 1, 1, 0, 0, 60], .outOfRange, "seconds 60"),
            ([0x2D, 0x06, 1, 1, 0, 0, 0], .outOfRange, "year 1581"),
            ([0x00, 0x00, 1, 1, 0, 0, 0], .specialValue, "year 0: value is not known"),
            ([0xE8, 0x07, 0, 1, 0, 0, 0], .specialValue, "month 0"),
            ([0xE8, 0x07, 1, 0, 0, 0, 0], .specialValue, "day 0"),
            ([0xE8, 0x07, 1, 1, 0, 0], .payloadTooShort, "needs 7 bytes at offset 0, payload has 6"),
        ]
        for (bytes, code, text) in cases {
            let reading = Decode.sig(0x2A08, bytes)[0]
            if let code {
                #expect(reading.error?.code == code, "\(bytes)")
                #expect(reading.error?.message.contains(text) == true, "\(bytes): \(String(describing: reading.error))")
                #expect(reading.value == nil)
            } else {
                #expect(reading.value == .text(text), "\(bytes)")
            }
        }
    }
}
