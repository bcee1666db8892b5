/// The one table from a reading (its name and unit) to what Home Assistant calls it: device class, unit of
/// measurement and state class. Every discovery payload takes these three from ``classify(name:unit:isText:)``.
///
/// Home Assistant accepts a device class only with the units listed for it in `DEVICE_CLASS_UNITS` and the state
/// classes in `DEVICE_CLASS_STATE_CLASSES` (homeassistant/components/sensor/const.py); a sensor announced with a
/// pair outside those is created with a warning and its statistics are refused. So the table lists, per device
/// class, only units HA lists for it, and the tests check every row against HA's accepted pairs.
///
/// Two spellings of "micro" are normalised on the way to the micro sign U+00B5 (what the readings decoder and
/// most datasheets write, `µS/cm`): Home Assistant up to 2025.9 lists its micro units with U+00B5 and refuses the
/// Greek small letter mu U+03BC beside a device class (2025.4.4, run against a real instance: "The unit of
/// measurement `μS/cm` is not valid together with device class `conductivity`"; from 2025.8 the MQTT sensor
/// rejects the whole config), while 2025.10 and later spell it U+03BC and convert an incoming U+00B5 themselves.
/// U+00B5 is the one spelling every version takes. Readings with no row keep their unit, get no device class and,
/// when numeric, state class `measurement` (heart rate in bpm, UV index); text readings (firmware, model) get
/// neither a unit nor a state class.
enum SensorClassTable {
    /// What HA is told about one reading.
    struct Classification: Sendable, Hashable {
        var deviceClass: String?
        var unit: String?
        var stateClass: String?
    }

    /// One row: readings whose name is one of `names` (or contains one of `nameFragments`) and whose unit is one
    /// of `units` get `deviceClass` and `stateClass`.
    struct Row: Sendable {
        var deviceClass: String
        var names: Set<String> = []
        var nameFragments: [String] = []
        var units: Set<String>
        var stateClass: String? = "measurement"

        func matches(name: String, unit: String) -> Bool {
            guard units.contains(unit) else { return false }
            if names.isEmpty && nameFragments.isEmpty { return true }
            return names.contains(name) || nameFragments.contains { name.contains($0) }
        }
    }

    static let micro = "\u{00B5}"

    /// First match wins, so rows that need a name come before rows that go by unit alone.
    static let rows: [Row] = [
        Row(deviceClass: "battery", names: ["battery", "battery_level"], nameFragments: ["battery"], units: ["%"]),
        Row(deviceClass: "humidity", nameFragments: ["humidity"], units: ["%"]),
        Row(deviceClass: "moisture", nameFragments: ["moisture"], units: ["%"]),
        Row(deviceClass: "carbon_dioxide", names: ["co2", "carbon_dioxide"], units: ["ppm"]),
        Row(
            deviceClass: "volatile_organic_compounds_parts", names: ["voc", "tvoc"], nameFragments: ["volatile"],
            units: ["ppm", "ppb"]),
        Row(deviceClass: "pm1", names: ["pm1", "pm1_0"], units: [micro + "g/m³"]),
        Row(deviceClass: "pm25", names: ["pm2_5", "pm25"], units: [micro + "g/m³"]),
        Row(deviceClass: "pm10", names: ["pm10"], units: [micro + "g/m³"]),
        Row(deviceClass: "wind_speed", nameFragments: ["wind_speed"], units: ["m/s", "km/h", "mph", "kn", "ft/s"]),
        // HA gives wind direction no state class at all (its statistics cannot average angles).
        Row(deviceClass: "wind_direction", nameFragments: ["wind_direction"], units: ["°"], stateClass: nil),
        Row(
            deviceClass: "distance", names: ["elevation", "distance", "altitude", "height"],
            units: ["m", "km", "cm", "mm", "in", "ft", "yd", "mi"]),
        Row(deviceClass: "weight", names: ["weight", "mass"], units: ["kg", "g", "mg", "lb", "oz"]),
        Row(deviceClass: "signal_strength", names: ["rssi", "signal_strength", "tx_power"], units: ["dBm", "dB"]),
        Row(deviceClass: "temperature", units: ["°C", "°F", "K"]),
        Row(deviceClass: "pressure", units: ["Pa", "hPa", "kPa", "bar", "mbar", "mmHg", "inHg", "psi"]),
        Row(deviceClass: "illuminance", units: ["lx"]),
        Row(deviceClass: "voltage", units: ["V", "mV", micro + "V"]),
        Row(deviceClass: "conductivity", units: [micro + "S/cm", "mS/cm", "S/cm"]),
        Row(deviceClass: "irradiance", units: ["W/m²"]),
    ]

    /// The classification of reading `name` with `unit`; `isText` for readings whose value is text.
    static func classify(name: String, unit: String?, isText: Bool) -> Classification {
        if isText { return Classification(deviceClass: nil, unit: nil, stateClass: nil) }
        guard let unit, !unit.isEmpty else {
            return Classification(deviceClass: nil, unit: nil, stateClass: "measurement")
        }
        let normalised = normaliseUnit(unit)
        if let row = rows.first(where: { $0.matches(name: name, unit: normalised) }) {
            return Classification(deviceClass: row.deviceClass, unit: normalised, stateClass: row.stateClass)
        }
        return Classification(deviceClass: nil, unit: normalised, stateClass: "measurement")
    }

    /// The Greek mu (U+03BC) as the micro sign (U+00B5), the spelling every Home Assistant version accepts;
    /// other units unchanged.
    static func normaliseUnit(_ unit: String) -> String {
        String(String.UnicodeScalarView(unit.unicodeScalars.map { $0 == "\u{03BC}" ? "\u{00B5}" : $0 }))
    }
}
