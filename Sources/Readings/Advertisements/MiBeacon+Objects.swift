/// The MiBeacon objects, as data.
///
/// From Xiaomi's "Mijia BLE Object Definition" (the English copy in pvvx/ATC_MiThermometer,
/// `InfoMijiaBLE/Mijia BLE Object Definition.md`, "Attribute format definition" and "Event format definition"):
/// every general attribute with a fixed layout, and the "someone is moving" event. Two kinds of objects that
/// document does not list come from Home Assistant's xiaomi-ble (`parser.py`), where devices send them: 0x100D,
/// temperature and humidity together (LYWSDCGQ, CGG1, pvvx's firmware), and the newer 0x48xx/0x4Cxx objects
/// (LYWSD02MMC, XMWSDJ04MMC, MJWSD06MMC). Values are what the document defines, with no per-model adjustment:
/// xiaomi-ble rounds the LYWSD03MMC's humidity down to whole percent and reads some models' 0x1007 as a light
/// on/off; this table gives the number the device sent.
extension MiBeacon {
    /// One object: its id and its fields, read when the object has at least `size` bytes (more are ignored, as
    /// later definitions may append).
    struct Object: Sendable {
        var id: UInt16
        var fields: [AdvertisedField]
        var size: Int

        init(_ id: UInt16, _ fields: AdvertisedField...) {
            self.id = id
            self.fields = fields
            self.size = fields.map(\.end).max() ?? 0
        }
    }

    private static let tenths = Scale(decimalExponent: -1)
    private static let hundredths = Scale(decimalExponent: -2)

    /// Smoke (0x1015): the document's three states.
    static let smokeStates: [UInt8: String] = [0x00: "normal", 0x01: "fire_alarm", 0x02: "equipment_failure"]
    /// Door sensor (0x1019): the document's four states.
    static let doorStates: [UInt8: String] = [
        0x00: "open", 0x01: "closed", 0x02: "not_closed_after_timeout", 0x03: "device_reset",
    ]

    /// Every object, in id order.
    static let objects: [Object] = [
        // Someone is moving (with light): the event says motion; its data is the illuminance, 0–120 000 lx.
        Object(
            0x000F, AdvertisedField("motion", .constant(.boolean(true))),
            .number("illuminance", .uint24le, unit: "lx")),
        Object(0x1004, .number("temperature", .sint16le, scale: tenths, unit: "°C")),
        Object(0x1006, .number("humidity", .uint16le, scale: tenths, unit: "%")),
        Object(0x1007, .number("illuminance", .uint24le, unit: "lx")),
        Object(0x1008, .number("moisture", .uint8, unit: "%")),
        Object(0x1009, .number("conductivity", .uint16le, unit: "\u{00B5}S/cm")),
        Object(0x100A, .number("battery", .uint8, unit: "%")),
        Object(
            0x100D, .number("temperature", .sint16le, scale: tenths, unit: "°C"),
            .number("humidity", at: 2, .uint16le, scale: tenths, unit: "%")),
        Object(0x1010, .number("formaldehyde", .uint16le, scale: hundredths, unit: "mg/m³")),
        Object(0x1012, AdvertisedField("switch", .boolean)),
        Object(0x1013, .number("consumable", .uint8, unit: "%")),
        Object(0x1014, AdvertisedField("moisture_detected", .boolean)),
        Object(0x1015, AdvertisedField("smoke", .enumeration(smokeStates))),
        Object(0x1016, AdvertisedField("gas", .boolean)),
        Object(0x1017, .number("no_motion_duration", .uint32le, unit: "s")),
        Object(0x1018, AdvertisedField("light", .boolean)),
        Object(0x1019, AdvertisedField("door", .enumeration(doorStates))),
        Object(0x101B, AdvertisedField("no_motion", .boolean)),
        Object(0x4801, AdvertisedField("temperature", .decimalFloat32(unit: "°C"))),
        Object(0x4802, .number("humidity", .uint8, unit: "%")),
        Object(0x4803, .number("battery", .uint8, unit: "%")),
        Object(0x4C01, AdvertisedField("temperature", .decimalFloat32(unit: "°C"))),
        Object(0x4C02, .number("humidity", .uint8, unit: "%")),
        Object(0x4C03, .number("battery", .uint8, unit: "%")),
        Object(0x4C08, AdvertisedField("humidity", .decimalFloat32(unit: "%"))),
    ]

    /// ``objects`` by id.
    static let byID: [UInt16: Object] = Dictionary(objects.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })

    /// What a decode needs of an object, as plain values: a lookup copies no field descriptions.
    struct Slot: Sendable {
        /// The size the object needs for its fields to be read.
        var size: Int
        /// Its fields in ``fieldList``.
        var fields: Range<Int>
    }

    /// The fields of every object, one after another, compiled.
    static let fieldList = FieldList(objects.flatMap(\.fields))

    /// The ids of ``objects``, in order, beside their ``slots``: a scan of a few dozen integers costs less than
    /// hashing, and finds the first object of an id, as ``byID`` keeps.
    static let ids: [UInt16] = objects.map(\.id)
    static let slots: [Slot] = {
        var slots: [Slot] = []
        var next = 0
        for object in objects {
            slots.append(Slot(size: object.size, fields: next..<(next &+ object.fields.count)))
            next &+= object.fields.count
        }
        return slots
    }()

    /// The slot of the object `id`, or `nil` when no object has it.
    static func slot(of id: UInt16) -> Slot? {
        guard let index = ids.firstIndex(of: id) else { return nil }
        return slots[index]
    }
}
