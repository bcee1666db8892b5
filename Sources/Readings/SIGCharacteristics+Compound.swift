extension SIGCharacteristics {
    // GSS Temperature Type: 1 armpit … 9 tympanum; 0 and 10…255 reserved for future use.
    private static let temperatureTypes: [UInt8: String] = [
        1: "armpit", 2: "body", 3: "ear", 4: "finger", 5: "gastrointestinal_tract",
        6: "mouth", 7: "rectum", 8: "toe", 9: "tympanum",
    ]

    // GSS Day of Week: 1 Monday … 7 Sunday, 0 "unknown", 8…255 reserved for future use.
    private static let daysOfWeek: [UInt8: String] = [
        1: "monday", 2: "tuesday", 3: "wednesday", 4: "thursday", 5: "friday", 6: "saturday", 7: "sunday",
    ]

    /// GSS Temperature Measurement (and Intermediate Temperature, which shares it): flags bit 0
    /// °C/°F, bit 1 time stamp present, bit 2 temperature type present, bits 3–7 reserved; the
    /// temperature is an IEEE-11073 FLOAT (medfloat32). A reserved temperature type code is a
    /// ``ReadingError/Code/reservedValue`` error rather than a bare number, so it is never mistaken for a site.
    private static let temperatureMeasurement = CompoundLayout(
        hasFlags: true, reservedFlags: 0xF8,
        fields: [
            .init(
                "temperature",
                .numberByFlag(
                    flag: 0x01,
                    whenClear: NumberDescription(format: .float, unit: "°C"),
                    whenSet: NumberDescription(format: .float, unit: "°F")
                )),
            .init("time_stamp", presentWhen: 0x02, .dateTime),
            .init("temperature_type", presentWhen: 0x04, .enumeration(names: temperatureTypes, specials: [:])),
        ])

    static let compoundEntries: [SIGCharacteristics.Entry] = [
        // GSS Date Time: year, month, day, hours, minutes, seconds.
        Entry(
            uuid16: 0x2A08, name: "Date Time",
            structure: .compound(
                CompoundLayout(
                    hasFlags: false,
                    fields: [
                        .init("date_time", .dateTime)
                    ]))),
        // GSS Temperature Measurement.
        Entry(uuid16: 0x2A1C, name: "Temperature Measurement", structure: .compound(temperatureMeasurement)),
        // GSS Intermediate Temperature: the Temperature Measurement structure.
        Entry(uuid16: 0x2A1E, name: "Intermediate Temperature", structure: .compound(temperatureMeasurement)),
        // GSS Current Time: Exact Time 256 (Day Date Time + Fractions256) + Adjust Reason.
        // Adjust Reason bits: 0 manual time update, 1 external reference time update,
        // 2 change of time zone, 3 change of DST; 4–7 reserved.
        Entry(
            uuid16: 0x2A2B, name: "Current Time",
            structure: .compound(
                CompoundLayout(
                    hasFlags: false,
                    fields: [
                        .init("current_time", .dateTime),
                        .init(
                            "day_of_week", .enumeration(names: daysOfWeek, specials: [0: "day of week is not known"])),
                        // Fractions256: 1/256 s, i.e. M=1 d=0 b=-8.
                        .init(
                            "fraction_of_second",
                            .number(NumberDescription(format: .uint8, scale: Scale(binaryExponent: -8), unit: "s"))),
                        .init(
                            "adjust_reason",
                            .bitNames(names: [
                                "manual_time_update", "external_reference_time_update", "change_of_time_zone",
                                "change_of_dst",
                            ])),
                    ]))),
        // GSS Heart Rate Measurement: flags bit 0 value uint8/uint16 (bpm), bits 1–2 sensor contact
        // status, bit 3 energy expended present (uint16, kilojoules), bit 4 RR intervals present
        // (uint16 each, 1/1024 s), bits 5–7 reserved.
        // Energy expended is reported in J (kJ × 10^3, exact) to stay with SI units.
        Entry(
            uuid16: 0x2A37, name: "Heart Rate Measurement",
            structure: .compound(
                CompoundLayout(
                    hasFlags: true, reservedFlags: 0xE0,
                    fields: [
                        .init(
                            "heart_rate",
                            .numberByFlag(
                                flag: 0x01,
                                whenClear: NumberDescription(format: .uint8, unit: "bpm"),
                                whenSet: NumberDescription(format: .uint16le, unit: "bpm")
                            )),
                        // 0 and 1: not supported; 2: supported, contact not detected; 3: contact detected.
                        .init(
                            "sensor_contact",
                            .flagBits(
                                shift: 1, width: 2,
                                names: [
                                    "not_supported", "not_supported", "not_detected", "detected",
                                ])),
                        .init(
                            "energy_expended", presentWhen: 0x08,
                            .number(
                                NumberDescription(format: .uint16le, scale: Scale(decimalExponent: 3), unit: "J")
                            )),
                        .init(
                            "rr_intervals", presentWhen: 0x10,
                            .repeatedNumbers(
                                NumberDescription(format: .uint16le, scale: Scale(binaryExponent: -10), unit: "s")
                            )),
                    ]
                ))),
        // GSS Weight Measurement: flags bit 0 SI (kg, m) / imperial (lb, in), bit 1 time stamp,
        // bit 2 user ID, bit 3 BMI and height, bits 4–7 reserved. Weight uint16: 0.005 kg
        // (M=5 d=-3) or 0.01 lb; 0xFFFF "measurement unsuccessful". User ID 0xFF "unknown user".
        // BMI uint16 0.1 kg/m². Height uint16: 0.001 m or 0.1 in.
        Entry(
            uuid16: 0x2A9D, name: "Weight Measurement",
            structure: .compound(
                CompoundLayout(
                    hasFlags: true, reservedFlags: 0xF0,
                    fields: [
                        .init(
                            "weight",
                            .numberByFlag(
                                flag: 0x01,
                                whenClear: NumberDescription(
                                    format: .uint16le, scale: Scale(multiplier: 5, decimalExponent: -3), unit: "kg",
                                    specials: [.init(raw: 0xFFFF, meaning: "measurement unsuccessful")]),
                                whenSet: NumberDescription(
                                    format: .uint16le, scale: Scale(decimalExponent: -2), unit: "lb",
                                    specials: [.init(raw: 0xFFFF, meaning: "measurement unsuccessful")])
                            )),
                        .init("time_stamp", presentWhen: 0x02, .dateTime),
                        .init(
                            "user_id", presentWhen: 0x04,
                            .number(
                                NumberDescription(format: .uint8, specials: [.init(raw: 0xFF, meaning: "unknown user")])
                            )),
                        .init(
                            "bmi", presentWhen: 0x08,
                            .number(
                                NumberDescription(format: .uint16le, scale: Scale(decimalExponent: -1), unit: "kg/m²")
                            )),
                        .init(
                            "height", presentWhen: 0x08,
                            .numberByFlag(
                                flag: 0x01,
                                whenClear: NumberDescription(
                                    format: .uint16le, scale: Scale(decimalExponent: -3), unit: "m"),
                                whenSet: NumberDescription(
                                    format: .uint16le, scale: Scale(decimalExponent: -1), unit: "in")
                            )),
                    ]
                ))),
    ]
}
