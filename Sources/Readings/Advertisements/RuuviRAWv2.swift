/// RuuviTag data format 5, RAWv2 (docs.ruuvi.com, "Data format 5 (RAWv2)"), manufacturer data 0x0499.
///
/// 24 bytes, every field most significant byte first: the format (5), temperature (sint16, 0.005 °C), humidity
/// (uint16, 0.0025 %), pressure (uint16, Pa above 50 000), acceleration x, y, z (sint16, mG), power (11 bits of
/// battery voltage above 1.6 V in mV, then 5 bits of transmit power above -40 dBm in 2 dBm steps), movement
/// counter (uint8), measurement sequence number (uint16), the address (6).
///
/// "Not available" is the largest value of an unsigned field, the smallest of a signed one, and all ones for the
/// address: such a reading has no value (`null` in JSON) and says "not available" in its error.
enum RuuviRAWv2 {
    /// The first byte of the data.
    static let dataFormat: UInt8 = 5
    /// The length of the data, format byte included.
    static let length = 24

    private static let milli = Scale(decimalExponent: -3)

    /// The fields, offsets from the start of the data (the format byte is offset 0).
    static let fields: [AdvertisedField] = [
        .number(
            "temperature", at: 1, .sint16be, scale: Scale(multiplier: 5, decimalExponent: -3), unit: "°C",
            notAvailable: [0x8000]),
        .number(
            "humidity", at: 3, .uint16be, scale: Scale(multiplier: 25, decimalExponent: -4), unit: "%",
            notAvailable: [0xFFFF]),
        .number(
            "pressure", at: 5, .uint16be, scale: Scale(decimalExponent: -2), unit: "hPa", notAvailable: [0xFFFF],
            rawOffset: 50_000),
        .number("acceleration_x", at: 7, .sint16be, scale: milli, unit: "G", notAvailable: [0x8000]),
        .number("acceleration_y", at: 9, .sint16be, scale: milli, unit: "G", notAvailable: [0x8000]),
        .number("acceleration_z", at: 11, .sint16be, scale: milli, unit: "G", notAvailable: [0x8000]),
        .number(
            "voltage", at: 13, .uint16be, scale: milli, unit: "V", notAvailable: [0x7FF], rawOffset: 1_600,
            bits: AdvertisedField.BitRange(shift: 5, width: 11)),
        .number(
            "tx_power", at: 13, .uint16be, scale: Scale(multiplier: 2), unit: "dBm", notAvailable: [0x1F],
            rawOffset: -20, bits: AdvertisedField.BitRange(shift: 0, width: 5)),
        .number("movement_counter", at: 15, .uint8, unit: nil, notAvailable: [0xFF]),
        .number("measurement_sequence", at: 16, .uint16be, unit: nil, notAvailable: [0xFFFF]),
    ]

    /// ``fields``, compiled.
    static let fieldList = FieldList(fields)

    static func decode(_ bytes: [UInt8], address: BluetoothAddress) throws(AdvertisementError) -> AdvertisementPayload {
        guard bytes.first == dataFormat else {
            throw AdvertisementError(
                .unsupportedFormat, .ruuviRAWv2, address,
                "the data format byte is \(bytes.first.map { String($0) } ?? "missing"), RAWv2 is 5")
        }
        guard bytes.count >= length else {
            throw .truncated(.ruuviRAWv2, address, "RAWv2", needs: length, at: 0, has: bytes.count)
        }
        let sequence = UInt32(bytes[16]) << 8 | UInt32(bytes[17])
        let advertised = BluetoothAddress(bytes, at: 18, order: .big)
        var readings: [Reading] = []
        readings.reserveCapacity(fieldList.count)
        fieldList.appendReadings(from: bytes, base: 0, to: &readings)
        return AdvertisementPayload(
            format: .ruuviRAWv2,
            readings: readings,
            packetID: sequence == 0xFFFF ? nil : sequence,
            advertisedAddress: advertised.rawValue == 0xFFFF_FFFF_FFFF ? nil : advertised)
    }
}
