/// The two formats of the custom thermometer firmwares, both in service data 0x181A and told apart by length, as
/// pvvx/ATC_MiThermometer's README documents them ("Bluetooth Advertising Formats"):
///
/// - pvvx's custom format, 15 bytes (the AD structure "size 19"), all little endian: address (6, least significant
///   first), temperature (sint16, 0.01 °C), humidity (uint16, 0.01 %), battery voltage (uint16, mV), battery
///   (uint8, %), measurement count (uint8), flags (uint8: bit 0 the reed switch input, bit 1 the trigger output's
///   value, bit 2 the trigger output is controlled by the thresholds, bit 3 the temperature trigger, bit 4 the
///   humidity trigger).
/// - atc1441's format, 13 bytes (the AD structure "size 16"), big endian: address (6, written order), temperature
///   (sint16, 0.1 °C), humidity (uint8, %), battery (uint8, %), battery voltage (uint16, mV), measurement count
///   (uint8).
///
/// The encrypted variants of both (11 and 8 bytes, pvvx's "energy efficient format") are not decoded.
enum PVVXFormats {
    /// The length of pvvx's custom format.
    static let customLength = 15
    /// The length of atc1441's format.
    static let atc1441Length = 13

    private static let hundredths = Scale(decimalExponent: -2)
    private static let tenths = Scale(decimalExponent: -1)
    private static let thousandths = Scale(decimalExponent: -3)

    /// pvvx's fields, offsets from the start of the data.
    static let customFields: [AdvertisedField] = [
        .number("temperature", at: 6, .sint16le, scale: hundredths, unit: "°C"),
        .number("humidity", at: 8, .uint16le, scale: hundredths, unit: "%"),
        .number("voltage", at: 10, .uint16le, scale: thousandths, unit: "V"),
        .number("battery", at: 12, .uint8, unit: "%"),
        AdvertisedField("reed_switch", at: 14, .flag(bit: 0)),
        AdvertisedField("trigger_output", at: 14, .flag(bit: 1)),
        AdvertisedField("trigger_output_controlled", at: 14, .flag(bit: 2)),
        AdvertisedField("temperature_trigger", at: 14, .flag(bit: 3)),
        AdvertisedField("humidity_trigger", at: 14, .flag(bit: 4)),
    ]
    /// Where pvvx's measurement count is.
    static let customCounterOffset = 13

    /// atc1441's fields.
    static let atc1441Fields: [AdvertisedField] = [
        .number("temperature", at: 6, .sint16be, scale: tenths, unit: "°C"),
        .number("humidity", at: 8, .uint8, unit: "%"),
        .number("battery", at: 9, .uint8, unit: "%"),
        .number("voltage", at: 10, .uint16be, scale: thousandths, unit: "V"),
    ]
    /// ``customFields`` and ``atc1441Fields``, compiled.
    static let customFieldList = FieldList(customFields)
    static let atc1441FieldList = FieldList(atc1441Fields)
    /// Where atc1441's measurement count is.
    static let atc1441CounterOffset = 12

    static func decode(
        _ bytes: [UInt8], format: AdvertisementFormat, address: BluetoothAddress
    ) throws(AdvertisementError) -> AdvertisementPayload {
        let isCustom = format == .pvvx
        let length = isCustom ? customLength : atc1441Length
        guard bytes.count == length else {
            throw AdvertisementError(
                .unsupportedFormat, format, address, "has \(bytes.count) bytes, the format has \(length)")
        }
        let fields = isCustom ? customFieldList : atc1441FieldList
        var readings: [Reading] = []
        readings.reserveCapacity(fields.count)
        fields.appendReadings(from: bytes, base: 0, to: &readings)
        return AdvertisementPayload(
            format: format,
            readings: readings,
            packetID: UInt32(bytes[isCustom ? customCounterOffset : atc1441CounterOffset]),
            advertisedAddress: BluetoothAddress(bytes, at: 0, order: isCustom ? .little : .big))
    }
}
