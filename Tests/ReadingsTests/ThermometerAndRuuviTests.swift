import Testing

@testable import Readings

/// pvvx's custom format, atc1441's format and RuuviTag RAWv2 against the vectors their owners publish.
@Suite("pvvx, ATC1441 and Ruuvi RAWv2")
struct ThermometerAndRuuviTests {
    // MARK: pvvx and ATC1441

    /// github.com/pvvx/ATC_MiThermometer, `python-interface/README.md`, "Parsing a custom frame": the AD structure
    /// `12 16 1a 18 5c c8 ee 38 c1 a4 b0 08 c3 14 ca 0a 50 14 05` (here from its service data on) and the values it
    /// prints.
    @Test func pvvxCustomFormatReadmeExample() throws {
        let payload = try Advertised.decode(
            "5cc8ee38c1a4 b008 c314 ca0a 50 14 05", from: .environmentalSensing, address: "A4:C1:38:EE:C8:5C")
        #expect(payload.format == .pvvx)
        #expect(payload.advertisedAddress?.description == "A4:C1:38:EE:C8:5C")
        #expect(payload.packetID == 20)
        #expect(
            payload.readings == [
                reading("temperature", .number(22.24), "°C"), reading("humidity", .number(53.15), "%"),
                reading("voltage", .number(2.762), "V"), reading("battery", .unsigned(80), "%"),
                // flags 0x05: input_gpio_value true, out_gpio_trg_value false, out_gpio_trg_flag true,
                // temp_trigger false, humidity_trigger false.
                reading("reed_switch", .boolean(true)), reading("trigger_output", .boolean(false)),
                reading("trigger_output_controlled", .boolean(true)), reading("temperature_trigger", .boolean(false)),
                reading("humidity_trigger", .boolean(false)),
            ])
    }

    /// The same README, "parse any type of format": frame1 `12 16 1a 18 cc bb aa 38 c1 a4 77 07 88 13 ca 0a 50 01 07`,
    /// "temperature: [19.11], humidity: [50.0], battery_level: [80], battery_v: [2.762]", built from counter 1 and
    /// all three GPIO flags set.
    @Test func pvvxCustomFormatReadmeFrame1() throws {
        let payload = try Advertised.decode(
            "ccbbaa38c1a4 7707 8813 ca0a 50 01 07", from: .environmentalSensing, address: "A4:C1:38:AA:BB:CC")
        #expect(payload.packetID == 1)
        #expect(
            Array(payload.readings.prefix(4)) == [
                reading("temperature", .number(19.11), "°C"), reading("humidity", .number(50), "%"),
                reading("voltage", .number(2.762), "V"), reading("battery", .unsigned(80), "%"),
            ])
        #expect(
            payload.readings.dropFirst(4).map(\.value) == [
                .boolean(true), .boolean(true), .boolean(true), .boolean(false), .boolean(false),
            ])
    }

    /// pvvx/ATC_MiThermometer, `python-interface/atc_mi_interface/atc_mi_format_test.py`, sample "atc1441":
    /// `10 16 1a 18 a4 c1 38 aa bb cc 00 ce 33 43 0a 6e c3`. The file gives bytes only; the values follow from the
    /// layout in the README ("atc1441 format", and `src/custom_beacon.h`, `adv_atc1441_t`): 0x00CE × 0.1 °C, 0x33 %,
    /// 0x43 %, 0x0A6E mV, count 0xC3.
    @Test func atc1441Sample() throws {
        let payload = try Advertised.decode(
            "a4c138aabbcc 00ce 33 43 0a6e c3", from: .environmentalSensing, address: "A4:C1:38:AA:BB:CC")
        #expect(payload.format == .atc1441)
        #expect(payload.advertisedAddress?.description == "A4:C1:38:AA:BB:CC")
        #expect(payload.packetID == 195)
        #expect(
            payload.readings == [
                reading("temperature", .number(20.6), "°C"), reading("humidity", .unsigned(51), "%"),
                reading("battery", .unsigned(67), "%"), reading("voltage", .number(2.67), "V"),
            ])
    }

    /// github.com/atc1441/ATC_MiThermometer, README, "Advertising format of the custom firmware": the example
    /// lays the fields out with placeholder bytes (aa aa temperature, bb humidity, cc battery, dd dd mV) and a
    /// negative temperature shows the sign.
    @Test func atc1441ReadmeLayout() throws {
        let payload = try Advertised.decode(
            "000000000000 aaaa bb cc dddd 00", from: .environmentalSensing, address: "00:00:00:00:00:00")
        #expect(
            payload.readings == [
                reading("temperature", .number(-2184.6), "°C"), reading("humidity", .unsigned(0xBB), "%"),
                reading("battery", .unsigned(0xCC), "%"), reading("voltage", .number(56.797), "V"),
            ])
    }

    @Test func otherLengthsUnderTheEnvironmentalSensingUUIDAreNotClaimed() {
        // pvvx's encrypted custom format (11 bytes): README, `0e 16 1a 18 bd 9d c5 4e fa b5 00 0e 8b b8 07`.
        let error = Advertised.failure(
            "bd9dc54efab5000e8bb807", from: .environmentalSensing, address: "A4:C1:38:AA:BB:CC")
        #expect(error?.code == .unsupportedFormat)
        #expect(
            error?.message
                == "service data 0x181A from A4:C1:38:AA:BB:CC has 11 bytes: pvvx's format has 15, ATC1441's 13 "
                + "(their encrypted variants are not decoded)")
        #expect(
            AdvertisementDecoder.format(of: .environmentalSensing, bytes: [UInt8](repeating: 0, count: 15)) == .pvvx)
        #expect(
            AdvertisementDecoder.format(of: .environmentalSensing, bytes: [UInt8](repeating: 0, count: 13)) == .atc1441)
        #expect(AdvertisementDecoder.format(of: .serviceData(uuid16: 0x181C), bytes: []) == nil)
    }

    @Test func aDeviceWithAKeyIsNotFedFromFormatsWithoutEncryption() {
        let error = Advertised.failure(
            "5cc8ee38c1a4 b008 c314 ca0a 50 14 05", from: .environmentalSensing, address: "A4:C1:38:EE:C8:5C",
            key: "231d39c1d7cc1ab1aee224cd096db932")
        #expect(error?.code == .plainFromKeyedDevice)
    }

    // MARK: Ruuvi RAWv2

    /// docs.ruuvi.com, "Data format 5 (RAWv2)", "Test vectors": raw binary data from the format byte on (the
    /// manufacturer data after the company identifier 0x0499).
    static let ruuviAddress = "CB:B8:33:4C:88:4F"

    @Test func ruuviValidData() throws {
        let payload = try Advertised.decode(
            "0512FC5394C37C0004FFFC040CAC364200CDCBB8334C884F", from: .ruuvi, address: Self.ruuviAddress)
        #expect(
            payload.readings == [
                reading("temperature", .number(24.3), "°C"), reading("humidity", .number(53.49), "%"),
                reading("pressure", .number(1000.44), "hPa"), reading("acceleration_x", .number(0.004), "G"),
                reading("acceleration_y", .number(-0.004), "G"), reading("acceleration_z", .number(1.036), "G"),
                reading("voltage", .number(2.977), "V"), reading("tx_power", .number(4), "dBm"),
                reading("movement_counter", .unsigned(66)), reading("measurement_sequence", .unsigned(205)),
            ])
        #expect(payload.packetID == 205)
        #expect(payload.advertisedAddress?.description == Self.ruuviAddress)
    }

    @Test func ruuviMaximumValues() throws {
        let payload = try Advertised.decode(
            "057FFFFFFEFFFE7FFF7FFF7FFFFFDEFEFFFECBB8334C884F", from: .ruuvi, address: Self.ruuviAddress)
        #expect(
            payload.readings == [
                reading("temperature", .number(163.835), "°C"), reading("humidity", .number(163.835), "%"),
                reading("pressure", .number(1155.34), "hPa"), reading("acceleration_x", .number(32.767), "G"),
                reading("acceleration_y", .number(32.767), "G"), reading("acceleration_z", .number(32.767), "G"),
                reading("voltage", .number(3.646), "V"), reading("tx_power", .number(20), "dBm"),
                reading("movement_counter", .unsigned(254)), reading("measurement_sequence", .unsigned(65534)),
            ])
    }

    @Test func ruuviMinimumValues() throws {
        let payload = try Advertised.decode(
            "058001000000008001800180010000000000CBB8334C884F", from: .ruuvi, address: Self.ruuviAddress)
        #expect(
            payload.readings == [
                reading("temperature", .number(-163.835), "°C"), reading("humidity", .number(0), "%"),
                reading("pressure", .number(500), "hPa"), reading("acceleration_x", .number(-32.767), "G"),
                reading("acceleration_y", .number(-32.767), "G"), reading("acceleration_z", .number(-32.767), "G"),
                reading("voltage", .number(1.6), "V"), reading("tx_power", .number(-40), "dBm"),
                reading("movement_counter", .unsigned(0)), reading("measurement_sequence", .unsigned(0)),
            ])
        #expect(payload.packetID == 0)
    }

    /// "Invalid values": every field "not available", which is a reading with no value (null) and why.
    @Test func ruuviInvalidValuesAreNulls() throws {
        let payload = try Advertised.decode(
            "058000FFFFFFFF800080008000FFFFFFFFFFFFFFFFFFFFFF", from: .ruuvi, address: Self.ruuviAddress)
        #expect(
            payload.readings == [
                notAvailable("temperature", "0x8000", "°C"), notAvailable("humidity", "0xFFFF", "%"),
                notAvailable("pressure", "0xFFFF", "hPa"), notAvailable("acceleration_x", "0x8000", "G"),
                notAvailable("acceleration_y", "0x8000", "G"), notAvailable("acceleration_z", "0x8000", "G"),
                notAvailable("voltage", "0x07FF", "V"), notAvailable("tx_power", "0x001F", "dBm"),
                notAvailable("movement_counter", "0xFF"), notAvailable("measurement_sequence", "0xFFFF"),
            ])
        #expect(payload.readings.allSatisfy { $0.value == nil })
        #expect(payload.packetID == nil)
        #expect(payload.advertisedAddress == nil)
    }

    @Test func otherRuuviFormatsAndShortDataAreTypedErrors() {
        // Data format 3 (RAWv1) is not decoded; a RAWv2 cut short is truncated.
        let rawV1 = Advertised.failure("03291A1ECE1EFC18F94202CA0B53", from: .ruuvi, address: Self.ruuviAddress)
        #expect(rawV1?.code == .unsupportedFormat)
        #expect(
            rawV1?.message == "manufacturer data 0x0499 from CB:B8:33:4C:88:4F: Ruuvi data format 0x03 is not RAWv2 (5)"
        )
        #expect(Advertised.failure("0512FC5394C37C", from: .ruuvi, address: Self.ruuviAddress)?.code == .truncated)
    }

    // MARK: Addresses

    @Test func addressesParseAndPrintAsBlueZWritesThem() throws {
        let address = try BluetoothAddress(parsing: "a4:c1:38:aa:bb:cc")
        #expect(address.description == "A4:C1:38:AA:BB:CC")
        #expect(address.rawValue == 0xA4C1_38AA_BBCC)
        #expect(address.bytes == [0xA4, 0xC1, 0x38, 0xAA, 0xBB, 0xCC])
        #expect(address.reversedBytes == [0xCC, 0xBB, 0xAA, 0x38, 0xC1, 0xA4])
        #expect(try BluetoothAddress(parsing: "A4-C1-38-AA-BB-CC") == address)
        for text in [
            "", "A4:C1:38:AA:BB", "A4:C1:38:AA:BB:CC:", "G4:C1:38:AA:BB:CC", "A4C1:38:AA:BB:CC:", "A4:C1;38:AA:BB:CC",
        ] {
            #expect(throws: AdvertisementError.self, "\(text)") { try BluetoothAddress(parsing: text) }
        }
        #expect(BluetoothAddress(rawValue: 1 << 48) == nil)
    }
}
