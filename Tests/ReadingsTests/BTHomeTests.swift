import Testing

@testable import Readings

/// BTHome v2 against the vectors its owners publish.
///
/// Sources, cited per vector:
/// - [format] bthome.io/format, the example "0A16D2FC4002C40903BF13" (service data after the UUID: 40 02C409 03BF13).
/// - [encryption] bthome.io/encryption, the worked example: key 231d39c1d7cc1ab1aee224cd096db932, address
///   5448E68F80A5, counter 00112233, data 02CA09 03BF13; the same vector is bthome-ble's
///   `tests/test_v2_encryption.py::test_encryption_example_1` (result d2fc41 a47266c95f73 00112233 78237214) and
///   `_2` (motion, 2101).
/// - [bthome-ble] github.com/Bluetooth-Devices/bthome-ble, `tests/test_parser_v2.py` (Home Assistant's BTHome
///   library), the test named after the vector; bytes are the service data after the UUID, values its expected
///   `native_value`s.
/// - [pvvx] github.com/pvvx/ATC_MiThermometer, `python-interface/README.md`, "Another parsing example using as
///   input an array of bytes encoded with encrypted bt_home_v2_format" (key AAAA…, address A4:C1:38:AA:BB:CC).
@Suite("BTHome v2")
struct BTHomeTests {
    struct Vector: Sendable, CustomStringConvertible {
        var source: String
        var hex: String
        var readings: [Reading]
        var packetID: UInt32? = nil

        var description: String { source }
    }

    static let micro = "\u{00B5}"
    static let address = "A4:C1:38:8D:18:B2"

    static let plainVectors: [Vector] = [
        Vector(
            source: "[format] example", hex: "40 02c409 03bf13",
            readings: [reading("temperature", .number(25), "°C"), reading("humidity", .number(50.55), "%")]),
        Vector(
            source: "[bthome-ble] test_bthome_temperature_humidity", hex: "40 02ca09 03bf13",
            readings: [reading("temperature", .number(25.06), "°C"), reading("humidity", .number(50.55), "%")]),
        Vector(
            source: "[bthome-ble] test_bthome_packet_id_temperature_humidity_battery",
            hex: "40 0009 015d 025d09 03b718",
            readings: [
                reading("battery", .unsigned(93), "%"), reading("temperature", .number(23.97), "°C"),
                reading("humidity", .number(63.27), "%"),
            ], packetID: 9),
        Vector(
            source: "[bthome-ble] test_bthome_pressure", hex: "40 04138a01",
            readings: [reading("pressure", .number(1008.83), "hPa")]),
        Vector(
            source: "[bthome-ble] test_bthome_illuminance", hex: "40 05138a14",
            readings: [reading("illuminance", .number(13460.67), "lx")]),
        Vector(
            source: "[bthome-ble] test_bthome_mass_kilograms", hex: "40 065e1f",
            readings: [reading("mass", .number(80.3), "kg")]),
        Vector(
            source: "[bthome-ble] test_bthome_mass_pounds", hex: "40 073e1d",
            readings: [reading("mass", .number(74.86), "lb")]),
        Vector(
            source: "[bthome-ble] test_bthome_dew_point", hex: "40 08ca06",
            readings: [reading("dew_point", .number(17.38), "°C")]),
        Vector(source: "[bthome-ble] test_bthome_count", hex: "40 0960", readings: [reading("count", .unsigned(96))]),
        Vector(
            source: "[bthome-ble] test_bthome_energy", hex: "40 0a138a14",
            readings: [reading("energy", .number(1346.067), "kWh")]),
        Vector(
            source: "[bthome-ble] test_bthome_power", hex: "40 0b021b00",
            readings: [reading("power", .number(69.14), "W")]),
        Vector(
            source: "[bthome-ble] test_bthome_voltage", hex: "40 0c020c",
            readings: [reading("voltage", .number(3.074), "V")]),
        Vector(
            source: "[bthome-ble] test_bthome_pm", hex: "40 0d120c 0e021c",
            readings: [
                reading("pm2_5", .unsigned(3090), micro + "g/m³"), reading("pm10", .unsigned(7170), micro + "g/m³"),
            ]
        ),
        Vector(
            source: "[bthome-ble] test_bthome_binary_sensor", hex: "40 0f01",
            readings: [reading("generic_boolean", .boolean(true))]),
        Vector(
            source: "[bthome-ble] test_bthome_binary_sensor_power", hex: "40 1001",
            readings: [reading("power_on", .boolean(true))]),
        Vector(
            source: "[bthome-ble] test_bthome_binary_sensor_opening", hex: "40 1100",
            readings: [reading("opening", .boolean(false))]),
        Vector(
            source: "[bthome-ble] test_bthome_binary_sensor_window", hex: "40 2d01",
            readings: [reading("window", .boolean(true))]),
        Vector(
            source: "[bthome-ble] test_bthome_co2", hex: "40 12e204", readings: [reading("co2", .unsigned(1250), "ppm")]
        ),
        Vector(
            source: "[bthome-ble] test_bthome_voc", hex: "40 133301",
            readings: [reading("voc", .unsigned(307), micro + "g/m³")]),
        Vector(
            source: "[bthome-ble] test_bthome_moisture", hex: "40 14020c",
            readings: [reading("moisture", .number(30.74), "%")]),
        Vector(
            source: "[bthome-ble] test_bthome_event_button_long_press", hex: "40 3a04",
            readings: [reading("button", .text("long_press"))]),
        Vector(
            source: "[bthome-ble] test_bthome_event_triple_button_device", hex: "40 3a00 3a01 3a03",
            readings: [
                reading("button_1", .text("none")), reading("button_2", .text("press")),
                reading("button_3", .text("triple_press")),
            ]),
        Vector(
            source: "[bthome-ble] test_bthome_event_button_hold_press", hex: "40 3a80",
            readings: [reading("button", .text("hold_press"))]),
        Vector(
            source: "[bthome-ble] test_bthome_event_dimmer_rotate_left_3_steps", hex: "40 3c0103",
            readings: [reading("dimmer", .text("rotate_left")), reading("dimmer_steps", .unsigned(3))]),
        Vector(
            source: "[bthome-ble] test_bthome_invalid_button_event", hex: "40 3afe",
            readings: [.failed("button", ReadingError(.reservedValue, "0xFE has no meaning"))]),
        Vector(
            source: "[bthome-ble] test_bthome_rotation", hex: "40 3f020c",
            readings: [reading("rotation", .number(307.4), "°")]
        ),
        Vector(
            source: "[bthome-ble] test_bthome_distance_millimeters", hex: "40 400c00",
            readings: [reading("distance", .unsigned(12), "mm")]),
        Vector(
            source: "[bthome-ble] test_bthome_distance_meters", hex: "40 414e00",
            readings: [reading("distance", .number(7.8), "m")]),
        Vector(
            source: "[bthome-ble] test_bthome_duration", hex: "40 424e3400",
            readings: [reading("duration", .number(13.39), "s")]),
        Vector(
            source: "[bthome-ble] test_bthome_current", hex: "40 434e34",
            readings: [reading("current", .number(13.39), "A")]),
        Vector(
            source: "[bthome-ble] test_bthome_speed", hex: "40 444e34",
            readings: [reading("speed", .number(133.9), "m/s")]),
        Vector(
            source: "[bthome-ble] test_bthome_speed_signed", hex: "40 624099dfff",
            readings: [reading("speed", .number(-2.123456), "m/s")]),
        Vector(
            source: "[bthome-ble] test_bthome_temperature_2", hex: "40 451101",
            readings: [reading("temperature", .number(27.3), "°C")]),
        Vector(
            source: "[bthome-ble] test_bthome_uv_index", hex: "40 4632", readings: [reading("uv_index", .number(5))]),
        Vector(
            source: "[bthome-ble] test_bthome_volume_liters", hex: "40 478756",
            readings: [reading("volume", .number(2215.1), "L")]),
        Vector(
            source: "[bthome-ble] test_bthome_volume_milliliters", hex: "40 48dc87",
            readings: [reading("volume", .unsigned(34780), "mL")]),
        Vector(
            source: "[bthome-ble] test_bthome_volume_flow_rate", hex: "40 49dc87",
            readings: [reading("volume_flow_rate", .number(34.78), "m³/h")]),
        Vector(
            source: "[bthome-ble] test_bthome_voltage_2", hex: "40 4a020c",
            readings: [reading("voltage", .number(307.4), "V")]),
        Vector(
            source: "[bthome-ble] test_bthome_gas", hex: "40 4b138a14",
            readings: [reading("gas", .number(1346.067), "m³")]),
        Vector(
            source: "[bthome-ble] test_bthome_gas_2", hex: "40 4c41018a01",
            readings: [reading("gas", .number(25821.505), "m³")]),
        Vector(
            source: "[bthome-ble] test_bthome_energy_2", hex: "40 4d12138a14",
            readings: [reading("energy", .number(344593.17), "kWh")]),
        Vector(
            source: "[bthome-ble] test_bthome_volume_liters_2", hex: "40 4e87562a01",
            readings: [reading("volume", .number(19551.879), "L")]),
        Vector(
            source: "[bthome-ble] test_bthome_volume_water", hex: "40 4f87562a01",
            readings: [reading("water", .number(19551.879), "L")]),
        Vector(
            source: "[bthome-ble] test_bthome_timestamp", hex: "44 505d396164",
            readings: [reading("timestamp", .text("2023-05-14T19:41:17Z"))]),
        Vector(
            source: "[bthome-ble] test_bthome_acceleration", hex: "44 518756",
            readings: [reading("acceleration", .number(22.151), "m/s²")]),
        Vector(
            source: "[bthome-ble] test_bthome_acceleration_signed", hex: "40 630057d0ff",
            readings: [reading("acceleration", .number(-3.123456), "m/s²")]),
        Vector(
            source: "[bthome-ble] test_bthome_gyroscope", hex: "44 528756",
            readings: [reading("gyroscope", .number(22.151), "°/s")]),
        Vector(
            source: "[bthome-ble] test_bthome_text", hex: "44 530c48656c6c6f20576f726c6421",
            readings: [reading("text", .text("Hello World!"))]),
        Vector(
            source: "[bthome-ble] test_bthome_raw", hex: "44 540c48656c6c6f20576f726c6421",
            readings: [reading("raw", .text("48656c6c6f20576f726c6421"))]),
        Vector(
            source: "[bthome-ble] test_bthome_text_invalid", hex: "44 530187",
            readings: [.failed("text", ReadingError(.invalidText, "1 bytes at offset 3 are not valid UTF-8"))]),
        Vector(
            source: "[bthome-ble] test_bthome_volume_storage", hex: "40 5587562a01",
            readings: [reading("volume_storage", .number(19551.879), "L")]),
        Vector(
            source: "[bthome-ble] test_bthome_conductivity", hex: "40 56e803",
            readings: [reading("conductivity", .unsigned(1000), micro + "S/cm")]),
        Vector(
            source: "[bthome-ble] test_bthome_temperature_1_byte", hex: "40 57ea",
            readings: [reading("temperature", .integer(-22), "°C")]),
        Vector(
            source: "[bthome-ble] test_bthome_temperature_1_byte_2", hex: "40 58ea",
            readings: [reading("temperature", .number(-7.7), "°C")]),
        Vector(
            source: "[bthome-ble] test_bthome_count_signed", hex: "40 59ea", readings: [reading("count", .integer(-22))]
        ),
        Vector(
            source: "[bthome-ble] test_bthome_count_signed_2_bytes", hex: "40 5aeaea",
            readings: [reading("count", .integer(-5398))]),
        Vector(
            source: "[bthome-ble] test_bthome_count_signed_4_bytes", hex: "40 5bea0234ea",
            readings: [reading("count", .integer(-365_690_134))]),
        Vector(
            source: "[bthome-ble] test_bthome_power_signed", hex: "40 5c02fbffff",
            readings: [reading("power", .number(-12.78), "W")]),
        Vector(
            source: "[bthome-ble] test_bthome_current_signed", hex: "40 5d02ea",
            readings: [reading("current", .number(-5.63), "A")]),
        Vector(
            source: "[bthome-ble] test_bthome_direction_precipitation", hex: "40 5e3f75 5f11d5",
            readings: [reading("direction", .number(300.15), "°"), reading("precipitation", .number(5454.5), "mm")]),
        Vector(
            source: "[bthome-ble] test_bthome_channel", hex: "40 6001", readings: [reading("channel", .unsigned(1))]),
        Vector(
            source: "[bthome-ble] test_bthome_revolutions_per_minute", hex: "40 61ac0d",
            readings: [reading("rotational_speed", .unsigned(3500), "rpm")]),
        Vector(
            source: "[bthome-ble] test_bthome_light_level", hex: "40 6402",
            readings: [reading("light_level", .unsigned(2))]),
        Vector(
            source: "[bthome-ble] test_bthome_double_temperature", hex: "40 02ca09 02cf09",
            readings: [reading("temperature_1", .number(25.06), "°C"), reading("temperature_2", .number(25.11), "°C")]),
        Vector(
            source: "[bthome-ble] test_bthome_triple_temperature_double_humidity_battery",
            hex: "40 02ca09 02cf09 02cf08 03b718 03b717 015d",
            readings: [
                reading("temperature_1", .number(25.06), "°C"), reading("temperature_2", .number(25.11), "°C"),
                reading("temperature_3", .number(22.55), "°C"), reading("humidity_1", .number(63.27), "%"),
                reading("humidity_2", .number(60.71), "%"), reading("battery", .unsigned(93), "%"),
            ]),
        Vector(
            source: "[bthome-ble] test_bthome_double_voltage_different_object_id",
            hex: "40 0001 0b000000 4a0d09 0133 0ce90c",
            readings: [
                reading("power", .number(0), "W"), reading("voltage_1", .number(231.7), "V"),
                reading("battery", .unsigned(51), "%"), reading("voltage_2", .number(3.305), "V"),
            ], packetID: 1),
        Vector(
            source: "[bthome-ble] test_bthome_shelly_button", hex: "40 0052 0164 3a01",
            readings: [reading("battery", .unsigned(100), "%"), reading("button", .text("press"))], packetID: 82),
        Vector(
            source: "[bthome-ble] test_bthome_test", hex: "40 00a7 0c780b 1000",
            readings: [reading("voltage", .number(2.936), "V"), reading("power_on", .boolean(false))], packetID: 167),
        Vector(
            source: "[bthome-ble] test_shelly_blu_ht_display_zb", hex: "40 002e 0164 1e01 2e34 451601",
            readings: [
                reading("battery", .unsigned(100), "%"), reading("light", .boolean(true)),
                reading("humidity", .unsigned(52), "%"), reading("temperature", .number(27.8), "°C"),
            ], packetID: 46),
        Vector(
            source: "[bthome-ble] test_bthome_not_sending_object_ids_in_numerical_order", hex: "40 03bf13 02ca09",
            readings: [reading("humidity", .number(50.55), "%"), reading("temperature", .number(25.06), "°C")]),
        // bthome-ble `parser.py` comments on the device information objects: "`00 01 02 04` represents firmware
        // version 4.2.1.0", "`00 01 06` represents firmware version 6.1.0".
        Vector(
            source: "[bthome-ble] parser.py firmware_version_4", hex: "40 f100010204",
            readings: [reading("firmware_revision", .text("4.2.1.0"))]),
        Vector(
            source: "[bthome-ble] parser.py firmware_version_3", hex: "40 f2000106",
            readings: [reading("firmware_revision", .text("6.1.0"))]),
    ]

    @Test(arguments: plainVectors)
    func plainVectorsDecodeToTheirPublishedValues(_ vector: Vector) throws {
        let payload = try Advertised.decode(vector.hex, from: .bthome, address: Self.address)
        #expect(payload.readings == vector.readings)
        #expect(payload.packetID == vector.packetID)
        #expect(payload.format == .bthome)
        #expect(!payload.isEncrypted)
        #expect(payload.counter == nil)
        #expect(payload.issues.isEmpty)
    }

    /// Objects with no published vector, checked against their layout in bthome-ble 3.25 (`const.py`, `parser.py`):
    /// 0x3B, a length byte whose low 5 bits count the arguments, the opcode, the arguments; 0xF0, a uint16.
    @Test func commandsAndTheDeviceTypeFollowTheirLayout() throws {
        let payload = try Advertised.decode("40 3b0002 3b0203abcd f00100", from: .bthome, address: Self.address)
        #expect(
            payload.readings == [
                reading("command_1", .text("toggle")), reading("command_2", .text("step_up")),
                reading("command_arguments", .text("abcd")), reading("device_type_id", .unsigned(1)),
            ])
    }

    @Test func theDeviceInformationByteSaysTriggerBasedAndCarriesTheAddress() throws {
        // [bthome-ble] test_sleepy_device / test_no_sleepy_device.
        #expect(try Advertised.decode("44 04138a01", from: .bthome, address: Self.address).isTriggerBased)
        #expect(try !Advertised.decode("40 04138a01", from: .bthome, address: Self.address).isTriggerBased)
        // [bthome-ble] test_bthome_with_mac: bit 1, then the address least significant byte first.
        let payload = try Advertised.decode("42 b2188d38c1a4 04138a01", from: .bthome, address: "11:22:33:44:55:66")
        #expect(payload.advertisedAddress?.description == "A4:C1:38:8D:18:B2")
        #expect(payload.readings == [reading("pressure", .number(1008.83), "hPa")])
    }

    @Test func versionsOtherThanTwoAreRefused() {
        // [bthome-ble] test_has_incorrect_version (e1: version 7) and test_incorrect_bthome_version (00: version 0).
        let seven = Advertised.failure("e1 02000c 04 04138a01", from: .bthome, address: Self.address)
        #expect(seven?.code == .unsupportedVersion)
        #expect(
            seven?.message
                == "BTHome from A4:C1:38:8D:18:B2: the device information byte 0xE1 says version 7, this decoder reads "
                + "version 2")
        #expect(Advertised.failure("00", from: .bthome, address: Self.address)?.code == .unsupportedVersion)
        #expect(Advertised.failure("", from: .bthome, address: Self.address)?.code == .truncated)
    }

    @Test func anUnknownObjectEndsTheDecodingAndKeepsWhatCameBefore() throws {
        // [bthome-ble] test_bthome_wrong_object_id: nothing before the unknown id, so nothing to give.
        let error = Advertised.failure("40 feca09", from: .bthome, address: Self.address)
        #expect(error?.code == .unknownObject)
        #expect(
            error?.message
                == "BTHome from A4:C1:38:8D:18:B2: object 0xFE at offset 1 is not a BTHome object; the 3 bytes from "
                + "it on are not read")
        // [bthome-ble] test_bthome_battery_wrong_object_id_humidity: the battery before it stays.
        let payload = try Advertised.decode("40 015d fe5d09 03b718", from: .bthome, address: Self.address)
        #expect(payload.readings == [reading("battery", .unsigned(93), "%")])
        #expect(payload.issues.map(\.code) == [.unknownObject])
    }

    @Test func aTruncatedObjectEndsTheDecodingAndSaysWhere() throws {
        // [bthome-ble] test_bthome_invalid_object_payload_data_length.
        let payload = try Advertised.decode("40 02ca09 03bf", from: .bthome, address: Self.address)
        #expect(payload.readings == [reading("temperature", .number(25.06), "°C")])
        #expect(
            payload.issues == [
                AdvertisementError(
                    .truncated,
                    "BTHome from A4:C1:38:8D:18:B2: object 0x03 needs 2 bytes at offset 5, the data has 6")
            ])
        #expect(Advertised.failure("40 02ca", from: .bthome, address: Self.address)?.code == .truncated)
        #expect(Advertised.failure("40 5305414243", from: .bthome, address: Self.address)?.code == .truncated)
    }
}
