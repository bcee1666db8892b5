/// The BTHome v2 objects, as data.
///
/// Transcribed from the format's published table (bthome.io/format, "Sensor data", "Binary sensor data",
/// "Events", "Misc data"), as its reference implementation carries it (Bluetooth-Devices/bthome-ble 3.25,
/// `const.py` and `event.py`): id, data type, factor, unit. Names are bthome.io's properties in snake_case, the
/// GATT readings' where the quantity is the same (`dew_point`, `pm2_5`, `illuminance`), with these exceptions,
/// so that names stay unique within one advertisement: the binary sensors "battery" (low), "power" (on) and
/// "moisture" (wet) are `battery_low`, `power_on` and `moisture_detected`, beside the numbers `battery`, `power`
/// and `moisture`.
extension BTHome {
    /// One object: its id and how its data reads.
    struct Object: Sendable {
        /// How the object's data is laid out.
        enum Layout: Sendable {
            /// Fixed-size fields.
            case fields([AdvertisedField], size: Int)
            /// 0x00: the packet id, a uint8, given as ``AdvertisementPayload/packetID`` rather than as a reading.
            case packetID
            /// A length byte, then that many bytes of UTF-8 text (0x53) or of raw data given as hex (0x54).
            case lengthPrefixed(name: String, isText: Bool)
            /// 0x3B: a length byte whose low 5 bits count the arguments, an opcode, the arguments.
            case command
        }

        var id: UInt8
        var layout: Layout
    }

    /// A fixed-size object of the given fields.
    private static func object(_ id: UInt8, _ fields: AdvertisedField...) -> Object {
        Object(id: id, layout: .fields(fields, size: fields.map(\.end).max() ?? 0))
    }

    /// A number object: `format` × `scale` in `unit`.
    private static func number(
        _ id: UInt8, _ name: String, _ format: ValueFormat, _ scale: Scale = .identity, _ unit: String? = nil
    ) -> Object {
        object(id, .number(name, format, scale: scale, unit: unit))
    }

    /// A binary sensor: one byte, 0 false, 1 true (bthome.io's "on" state: open, detected, low, unlocked, …).
    private static func binary(_ id: UInt8, _ name: String) -> Object {
        object(id, AdvertisedField(name, .boolean))
    }

    private static let hundredths = Scale(decimalExponent: -2)
    private static let tenths = Scale(decimalExponent: -1)
    private static let thousandths = Scale(decimalExponent: -3)
    private static let millionths = Scale(decimalExponent: -6)
    private static let micro = "\u{00B5}"

    /// Button events (bthome.io "Events", button): one byte.
    static let buttonEvents: [UInt8: String] = [
        0x00: "none", 0x01: "press", 0x02: "double_press", 0x03: "triple_press", 0x04: "long_press",
        0x05: "long_double_press", 0x06: "long_triple_press", 0x80: "hold_press", 0x81: "hold_release",
    ]
    /// Dimmer events (bthome.io "Events", dimmer): one byte, then the number of steps.
    static let dimmerEvents: [UInt8: String] = [0x00: "none", 0x01: "rotate_left", 0x02: "rotate_right"]
    /// Command opcodes (bthome-ble 3.25 `event.py`, object 0x3B).
    static let commands: [UInt8: String] = [
        0x00: "off", 0x01: "on", 0x02: "toggle", 0x03: "step_up", 0x04: "step_down",
    ]

    /// Every object, in id order.
    static let objects: [Object] = [
        Object(id: 0x00, layout: .packetID),
        number(0x01, "battery", .uint8, .identity, "%"),
        number(0x02, "temperature", .sint16le, hundredths, "°C"),
        number(0x03, "humidity", .uint16le, hundredths, "%"),
        number(0x04, "pressure", .uint24le, hundredths, "hPa"),
        number(0x05, "illuminance", .uint24le, hundredths, "lx"),
        number(0x06, "mass", .uint16le, hundredths, "kg"),
        number(0x07, "mass", .uint16le, hundredths, "lb"),
        number(0x08, "dew_point", .sint16le, hundredths, "°C"),
        number(0x09, "count", .uint8),
        number(0x0A, "energy", .uint24le, thousandths, "kWh"),
        number(0x0B, "power", .uint24le, hundredths, "W"),
        number(0x0C, "voltage", .uint16le, thousandths, "V"),
        number(0x0D, "pm2_5", .uint16le, .identity, micro + "g/m³"),
        number(0x0E, "pm10", .uint16le, .identity, micro + "g/m³"),
        binary(0x0F, "generic_boolean"),
        binary(0x10, "power_on"),
        binary(0x11, "opening"),
        number(0x12, "co2", .uint16le, .identity, "ppm"),
        number(0x13, "voc", .uint16le, .identity, micro + "g/m³"),
        number(0x14, "moisture", .uint16le, hundredths, "%"),
        binary(0x15, "battery_low"),
        binary(0x16, "battery_charging"),
        binary(0x17, "carbon_monoxide"),
        binary(0x18, "cold"),
        binary(0x19, "connectivity"),
        binary(0x1A, "door"),
        binary(0x1B, "garage_door"),
        binary(0x1C, "gas"),
        binary(0x1D, "heat"),
        binary(0x1E, "light"),
        binary(0x1F, "lock"),
        binary(0x20, "moisture_detected"),
        binary(0x21, "motion"),
        binary(0x22, "moving"),
        binary(0x23, "occupancy"),
        binary(0x24, "plug"),
        binary(0x25, "presence"),
        binary(0x26, "problem"),
        binary(0x27, "running"),
        binary(0x28, "safety"),
        binary(0x29, "smoke"),
        binary(0x2A, "sound"),
        binary(0x2B, "tamper"),
        binary(0x2C, "vibration"),
        binary(0x2D, "window"),
        number(0x2E, "humidity", .uint8, .identity, "%"),
        number(0x2F, "moisture", .uint8, .identity, "%"),
        object(0x3A, AdvertisedField("button", .enumeration(buttonEvents))),
        Object(id: 0x3B, layout: .command),
        object(
            0x3C, AdvertisedField("dimmer", .enumeration(dimmerEvents)),
            .number("dimmer_steps", at: 1, .uint8, unit: nil)),
        number(0x3D, "count", .uint16le),
        number(0x3E, "count", .uint32le),
        number(0x3F, "rotation", .sint16le, tenths, "°"),
        number(0x40, "distance", .uint16le, .identity, "mm"),
        number(0x41, "distance", .uint16le, tenths, "m"),
        number(0x42, "duration", .uint24le, thousandths, "s"),
        number(0x43, "current", .uint16le, thousandths, "A"),
        number(0x44, "speed", .uint16le, hundredths, "m/s"),
        number(0x45, "temperature", .sint16le, tenths, "°C"),
        number(0x46, "uv_index", .uint8, tenths),
        number(0x47, "volume", .uint16le, tenths, "L"),
        number(0x48, "volume", .uint16le, .identity, "mL"),
        number(0x49, "volume_flow_rate", .uint16le, thousandths, "m³/h"),
        number(0x4A, "voltage", .uint16le, tenths, "V"),
        number(0x4B, "gas", .uint24le, thousandths, "m³"),
        number(0x4C, "gas", .uint32le, thousandths, "m³"),
        number(0x4D, "energy", .uint32le, thousandths, "kWh"),
        number(0x4E, "volume", .uint32le, thousandths, "L"),
        number(0x4F, "water", .uint32le, thousandths, "L"),
        object(0x50, AdvertisedField("timestamp", .timestamp)),
        number(0x51, "acceleration", .uint16le, thousandths, "m/s²"),
        number(0x52, "gyroscope", .uint16le, thousandths, "°/s"),
        Object(id: 0x53, layout: .lengthPrefixed(name: "text", isText: true)),
        Object(id: 0x54, layout: .lengthPrefixed(name: "raw", isText: false)),
        number(0x55, "volume_storage", .uint32le, thousandths, "L"),
        number(0x56, "conductivity", .uint16le, .identity, micro + "S/cm"),
        number(0x57, "temperature", .sint8, .identity, "°C"),
        number(0x58, "temperature", .sint8, Scale(multiplier: 35, decimalExponent: -2), "°C"),
        number(0x59, "count", .sint8),
        number(0x5A, "count", .sint16le),
        number(0x5B, "count", .sint32le),
        number(0x5C, "power", .sint32le, hundredths, "W"),
        number(0x5D, "current", .sint16le, thousandths, "A"),
        number(0x5E, "direction", .uint16le, hundredths, "°"),
        number(0x5F, "precipitation", .uint16le, tenths, "mm"),
        number(0x60, "channel", .uint8),
        number(0x61, "rotational_speed", .uint16le, .identity, "rpm"),
        number(0x62, "speed", .sint32le, millionths, "m/s"),
        number(0x63, "acceleration", .sint32le, millionths, "m/s²"),
        number(0x64, "light_level", .uint8),
        number(0x65, "settings_revision", .uint8),
        // "Misc data": what the device is, not what it measures.
        number(0xF0, "device_type_id", .uint16le),
        object(0xF1, AdvertisedField("firmware_revision", .version(components: 4))),
        object(0xF2, AdvertisedField("firmware_revision", .version(components: 3))),
    ]

    /// ``objects`` by id: 256 slots, so a lookup is one index.
    static let byID: [Object?] = {
        var table = [Object?](repeating: nil, count: 256)
        for object in objects { table[Int(object.id)] = object }
        return table
    }()

    /// What a decode needs of an object, as plain values: a lookup copies no field descriptions.
    struct Slot: Sendable {
        enum Kind: UInt8, Sendable {
            case unknown, fields, packetID, lengthPrefixed, command
        }

        var kind: Kind = .unknown
        /// The fixed size of a ``Kind/fields`` object.
        var size = 0
        /// Its fields in ``fieldList``.
        var fields: Range<Int> = 0..<0
    }

    /// The fields of every fixed-size object, one after another, compiled.
    static let fieldList = FieldList(
        objects.flatMap { object -> [AdvertisedField] in
            if case .fields(let fields, _) = object.layout { return fields }
            return []
        })

    /// ``byID`` as ``Slot``s.
    static let slots: [Slot] = {
        var table = [Slot](repeating: Slot(), count: 256)
        var next = 0
        for object in objects {
            var slot = Slot()
            switch object.layout {
            case .fields(let fields, let size):
                slot = Slot(kind: .fields, size: size, fields: next..<(next &+ fields.count))
                next &+= fields.count
            case .packetID: slot.kind = .packetID
            case .lengthPrefixed: slot.kind = .lengthPrefixed
            case .command: slot.kind = .command
            }
            table[Int(object.id)] = slot  // the last of an id wins, as in byID
        }
        return table
    }()
}
