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
        Row(deviceClass: "volatile_organic_compounds", names: ["voc", "tvoc"], units: [micro + "g/m³"]),
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
        // Meters and tanks (BTHome's gas, water, volume, volume_storage): what HA's own BTHome integration announces;
        // HA takes a total (never a measurement) for gas, water and volume.
        Row(deviceClass: "gas", names: ["gas"], units: ["m³", "ft³", "CCF"], stateClass: "total"),
        Row(deviceClass: "water", names: ["water"], units: ["L", "m³", "ft³", "gal", "CCF"], stateClass: "total"),
        Row(deviceClass: "volume_storage", names: ["volume_storage"], units: ["L", "mL", "m³", "ft³", "gal"]),
        Row(deviceClass: "volume", names: ["volume"], units: ["L", "mL", "m³", "ft³", "gal"], stateClass: "total"),
        Row(deviceClass: "precipitation", names: ["precipitation", "rain"], units: ["mm", "cm", "in"]),
        Row(deviceClass: "temperature", units: ["°C", "°F", "K"]),
        Row(deviceClass: "pressure", units: ["Pa", "hPa", "kPa", "bar", "mbar", "mmHg", "inHg", "psi"]),
        Row(deviceClass: "illuminance", units: ["lx"]),
        Row(deviceClass: "voltage", units: ["V", "mV", micro + "V"]),
        Row(deviceClass: "conductivity", units: [micro + "S/cm", "mS/cm", "S/cm"]),
        Row(deviceClass: "irradiance", units: ["W/m²"]),
        Row(deviceClass: "power", units: ["W", "kW", "mW"]),
        // A meter's reading (BTHome energy): HA refuses `measurement` for energy.
        Row(deviceClass: "energy", units: ["Wh", "kWh", "MWh"], stateClass: "total"),
        Row(deviceClass: "current", units: ["A", "mA"]),
        Row(deviceClass: "speed", units: ["m/s", "km/h", "mph", "kn", "ft/s"]),
        Row(deviceClass: "volume_flow_rate", units: ["m³/h", "L/min", "gal/min", "mL/s"]),
        Row(deviceClass: "duration", units: ["s", "ms", "min", "h", "d"]),
    ]

    /// Home Assistant's binary sensor device classes by reading name (`binary_sensor` entities, for readings whose
    /// value is a boolean): BTHome's names are HA's classes, but for the three BTHome renames (``Readings`` names
    /// them apart from the numbers `battery`, `power`, `moisture`); MiBeacon's `switch` is a power switch as in HA's
    /// Xiaomi integration. `true` is the "on" state of each class (open, detected, low, unlocked, unsafe), as the
    /// decoders give it. Booleans without a row (`generic_boolean`, pvvx's `reed_switch`, MiBeacon's `no_motion`,
    /// whose "on" is the absence of motion) get a binary sensor without a class.
    static let binaryDeviceClasses: [String: String] = {
        var table: [String: String] = [:]
        for same in [
            "battery_charging", "carbon_monoxide", "cold", "connectivity", "door", "garage_door", "gas", "heat",
            "light", "lock", "moisture", "motion", "moving", "occupancy", "opening", "plug", "power", "presence",
            "problem", "running", "safety", "smoke", "sound", "tamper", "vibration", "window", "battery",
        ] {
            table[same] = same
        }
        table["battery_low"] = "battery"
        table["power_on"] = "power"
        table["moisture_detected"] = "moisture"
        table["switch"] = "power"
        return table
    }()

    /// The binary sensor device class of boolean reading `name` (`door_2`, a second door of one device, as `door`).
    static func binaryDeviceClass(name: String) -> String? {
        binaryDeviceClasses[name] ?? binaryDeviceClasses[baseName(name)]
    }

    /// The event types of a text reading that is an event (BTHome's `button` and `dimmer`, numbered when a device
    /// has several: `button_2`), HA's `event` entities; nil for other readings. `none` (no event in this packet)
    /// is not an event type.
    static func eventTypes(name: String) -> [String]? {
        switch baseName(name) {
        case "button":
            [
                "press", "double_press", "triple_press", "long_press", "long_double_press", "long_triple_press",
                "hold_press", "hold_release",
            ]
        case "dimmer": ["rotate_left", "rotate_right"]
        default: nil
        }
    }

    /// The reading that carries event `name`'s detail (a dimmer's steps), given as an attribute of the event rather
    /// than as an entity of its own: `dimmer_steps` for `dimmer`, `dimmer_steps_2` for `dimmer_2`.
    static func eventDetail(of name: String) -> (reading: String, attribute: String)? {
        let base = baseName(name)
        guard base == "dimmer" else { return nil }
        return ("dimmer_steps" + name.dropFirst(base.count), "steps")
    }

    /// Whether numeric reading `name` is an event's detail (``eventDetail(of:)``), with no entity of its own.
    static func isEventDetail(_ name: String) -> Bool {
        baseName(name) == "dimmer_steps"
    }

    /// `name` without a trailing `_<number>` (the decoders number a name that occurs more than once in one
    /// advertisement: `temperature_1`, `temperature_2`); the name itself when it has none.
    static func baseName(_ name: String) -> String {
        guard let underscore = name.lastIndex(of: "_") else { return name }
        let suffix = name[name.index(after: underscore)...]
        guard !suffix.isEmpty, suffix.allSatisfy(\.isASCIIDigit), underscore != name.startIndex else { return name }
        return String(name[..<underscore])
    }

    /// The classification of reading `name` with `unit`; `isText` for readings whose value is text.
    static func classify(name: String, unit: String?, isText: Bool) -> Classification {
        if isText { return Classification(deviceClass: nil, unit: nil, stateClass: nil) }
        guard let unit, !unit.isEmpty else {
            return Classification(deviceClass: nil, unit: nil, stateClass: "measurement")
        }
        let normalised = normaliseUnit(unit)
        // The name as it is first (`pm2_5` ends like a numbered name), then without a number (`pm2_5_2`).
        let base = baseName(name)
        if let row = rows.first(where: { $0.matches(name: name, unit: normalised) })
            ?? rows.first(where: { base != name && $0.matches(name: base, unit: normalised) })
        {
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

extension Character {
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
