/// The Bluetooth SIG characteristics this module decodes, as data checked against the GATT
/// Specification Supplement (GSS).
///
/// Section numbers of the GSS change between its versions and could not be checked against
/// one edition here, so each entry names the GSS characteristic instead of a section number.
public enum SIGCharacteristics {
    /// One SIG characteristic: its 16-bit UUID, its SIG name, and how its value is laid out.
    public struct Entry: Sendable, Hashable {
        /// How the value is laid out.
        public enum Structure: Sendable, Hashable {
            /// One number.
            case number(readingName: String, NumberDescription)
            /// UTF-8 text (trailing NULs trimmed).
            case text(readingName: String)
            /// Several fields, usually driven by a flags byte.
            case compound(CompoundLayout)
        }

        /// The 16-bit UUID, e.g. 0x2A6E.
        public var uuid16: UInt16
        /// The SIG name, e.g. "Temperature".
        public var name: String
        /// How the value is laid out.
        public var structure: Structure

        /// Creates an entry.
        public init(uuid16: UInt16, name: String, structure: Structure) {
            self.uuid16 = uuid16
            self.name = name
            self.structure = structure
        }

        /// The names of the readings the entry can produce.
        public var readingNames: [String] {
            switch structure {
            case .number(let readingName, _), .text(let readingName): [readingName]
            case .compound(let layout): layout.readingNames
            }
        }

        /// Decodes a payload. Never throws; bytes beyond the defined fields are ignored because
        /// GSS allows later versions to extend a characteristic.
        func readings(from bytes: [UInt8]) -> [Reading] {
            switch structure {
            case .number(let readingName, let number):
                return [number.reading(named: readingName, from: ByteReader(bytes), at: 0)]
            case .text(let readingName):
                do throws(ReadingError) {
                    let text = try ValueFormat.utf8.readText(from: ByteReader(bytes), at: 0)
                    return [Reading(name: readingName, value: .text(text))]
                } catch {
                    return [.failed(readingName, error)]
                }
            case .compound(let layout):
                return layout.readings(from: bytes)
            }
        }
    }

    /// Every entry, in UUID order.
    public static let all: [Entry] = (simpleEntries + compoundEntries).sorted { $0.uuid16 < $1.uuid16 }

    private static let byUUID: [UInt16: Entry] = Dictionary(
        all.map { ($0.uuid16, $0) }, uniquingKeysWith: { first, _ in first })

    /// The entry for a 16-bit UUID, or `nil` when this module has none.
    public static func entry(_ uuid16: UInt16) -> Entry? {
        byUUID[uuid16]
    }

    // MARK: - Single-value characteristics

    private static func number(
        _ uuid16: UInt16, _ name: String, _ readingName: String, _ format: ValueFormat,
        scale: Scale = .identity, unit: String?, specials: [NumberDescription.Special] = [], valid: ValidRange? = nil
    ) -> Entry {
        Entry(
            uuid16: uuid16, name: name,
            structure: .number(
                readingName: readingName,
                NumberDescription(format: format, scale: scale, unit: unit, specials: specials, valid: valid)
            ))
    }

    private static func text(_ uuid16: UInt16, _ name: String, _ readingName: String) -> Entry {
        Entry(uuid16: uuid16, name: name, structure: .text(readingName: readingName))
    }

    private static let hundredths = Scale(decimalExponent: -2)
    private static let tenths = Scale(decimalExponent: -1)
    /// "value is 65534 or greater": still a number (a lower bound), so the reading keeps it.
    private static let atLeast65534 = NumberDescription.Special(
        raw: 0xFFFE,
        meaning: "value is 65534 or greater",
        keepsValue: true
    )

    static let simpleEntries: [Entry] = [
        // GSS Battery Level: uint8, percentage, M=1 d=0 b=0, 0…100.
        number(0x2A19, "Battery Level", "battery", .uint8, unit: "%", valid: ValidRange(0...100)),
        // GSS Elevation: sint24, metres, M=1 d=-2 b=0.
        number(0x2A6C, "Elevation", "elevation", .sint24le, scale: hundredths, unit: "m"),
        // GSS Pressure: uint32, pascals, M=1 d=-1 b=0.
        number(0x2A6D, "Pressure", "pressure", .uint32le, scale: tenths, unit: "Pa"),
        // GSS Temperature: sint16, °C, M=1 d=-2 b=0, -273.15…327.67, 0x8000 "value is not known".
        number(
            0x2A6E, "Temperature", "temperature", .sint16le, scale: hundredths, unit: "°C",
            specials: [.notKnown(0x8000)], valid: ValidRange(-273.15...327.67)),
        // GSS Humidity: uint16, percent, M=1 d=-2 b=0, 0…100, 0xFFFF "value is not known".
        number(
            0x2A6F, "Humidity", "humidity", .uint16le, scale: hundredths, unit: "%",
            specials: [.notKnown(0xFFFF)], valid: ValidRange(0...100)),
        // GSS True Wind Speed: uint16, m/s, M=1 d=-2 b=0.
        number(0x2A70, "True Wind Speed", "true_wind_speed", .uint16le, scale: hundredths, unit: "m/s"),
        // GSS True Wind Direction: uint16, degrees, M=1 d=-2 b=0, 0…359.99.
        number(
            0x2A71, "True Wind Direction", "true_wind_direction", .uint16le, scale: hundredths, unit: "°",
            valid: ValidRange(0...359.99)),
        // GSS Apparent Wind Speed: uint16, m/s, M=1 d=-2 b=0.
        number(0x2A72, "Apparent Wind Speed", "apparent_wind_speed", .uint16le, scale: hundredths, unit: "m/s"),
        // GSS Apparent Wind Direction: uint16, degrees, M=1 d=-2 b=0, 0…359.99.
        number(
            0x2A73, "Apparent Wind Direction", "apparent_wind_direction", .uint16le, scale: hundredths, unit: "°",
            valid: ValidRange(0...359.99)),
        // GSS UV Index: uint8, unitless, M=1 d=0 b=0.
        number(0x2A76, "UV Index", "uv_index", .uint8, unit: nil),
        // GSS Irradiance: uint16, W/m², M=1 d=-1 b=0.
        number(0x2A77, "Irradiance", "irradiance", .uint16le, scale: tenths, unit: "W/m²"),
        // GSS Dew Point: sint8, °C, M=1 d=0 b=0.
        number(0x2A7B, "Dew Point", "dew_point", .sint8, unit: "°C"),
        // GSS Illuminance: uint24, lux, M=1 d=-2 b=0, 0xFFFFFF "value is not known".
        number(
            0x2AFB, "Illuminance", "illuminance", .uint24le, scale: hundredths, unit: "lx",
            specials: [.notKnown(0xFF_FFFF)]),
        // GSS CO2 Concentration: uint16, ppm, M=1 d=0 b=0, 0xFFFE "65534 or greater", 0xFFFF "not known".
        number(
            0x2B8C, "CO2 Concentration", "co2", .uint16le, unit: "ppm",
            specials: [atLeast65534, .notKnown(0xFFFF)]),
        // GSS Particulate Matter - PM1/PM2.5/PM10 Concentration: medfloat16 (SFLOAT) in kg/m³.
        // Reported in µg/m³ (× 10^9, folded into the SFLOAT exponent so it stays exact) because
        // every air-quality threshold and display uses µg/m³; kg/m³ would read 1.2e-08.
        number(
            0x2BD5, "Particulate Matter - PM1 Concentration", "pm1", .sfloat,
            scale: Scale(decimalExponent: 9), unit: "µg/m³"),
        number(
            0x2BD6, "Particulate Matter - PM2.5 Concentration", "pm2_5", .sfloat,
            scale: Scale(decimalExponent: 9), unit: "µg/m³"),
        number(
            0x2BD7, "Particulate Matter - PM10 Concentration", "pm10", .sfloat,
            scale: Scale(decimalExponent: 9), unit: "µg/m³"),
        // GSS VOC Concentration: uint16, ppb, M=1 d=0 b=0, 0xFFFE "65534 or greater", 0xFFFF "not known".
        number(
            0x2BE7, "VOC Concentration", "voc", .uint16le, unit: "ppb",
            specials: [atLeast65534, .notKnown(0xFFFF)]),
        // GSS Model Number String: utf8s.
        text(0x2A24, "Model Number String", "model"),
        // GSS Serial Number String: utf8s.
        text(0x2A25, "Serial Number String", "serial_number"),
        // GSS Firmware Revision String: utf8s.
        text(0x2A26, "Firmware Revision String", "firmware_revision"),
        // GSS Hardware Revision String: utf8s.
        text(0x2A27, "Hardware Revision String", "hardware_revision"),
        // GSS Software Revision String: utf8s.
        text(0x2A28, "Software Revision String", "software_revision"),
        // GSS Manufacturer Name String: utf8s.
        text(0x2A29, "Manufacturer Name String", "manufacturer"),
    ]
}
