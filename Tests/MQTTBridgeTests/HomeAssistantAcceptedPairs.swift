/// What Home Assistant accepts together for a sensor, as data, to check the bridge's one table against.
///
/// Source: home-assistant/core, `homeassistant/components/sensor/const.py` (`DEVICE_CLASS_UNITS`,
/// `DEVICE_CLASS_STATE_CLASSES`) at commit 00eb6680fbf6bdf7af2499095f2e74fca980a148 (the 2025 development
/// line), with the `UnitOf…` enums expanded from `homeassistant/const.py` of the same line. "Micro" is the
/// micro sign U+00B5 as HA 2025.4 to 2025.9 list it (a real HA 2025.4.4 refused U+03BC beside a device class;
/// 2025.10 and later list U+03BC and convert U+00B5 themselves), written `\u{00B5}` below so that no editor can
/// silently swap it. Only the device classes the bridge can use are listed; the rest of HA's table is not needed
/// to check it. The rows from `volatile_organic_compounds` on (the readings of advertisements) were read from the
/// installed Home Assistant 2025.4.4's `sensor/const.py`, the version `make ha-check` runs.
enum HomeAssistantAcceptedPairs {
    static let mu = "\u{00B5}"

    static let units: [String: Set<String>] = [
        "temperature": ["°C", "°F", "K"],
        "humidity": ["%"],
        "moisture": ["%"],
        "battery": ["%"],
        "pressure": ["Pa", "hPa", "kPa", "bar", "cbar", "mbar", "mmHg", "inHg", "psi"],
        "illuminance": ["lx"],
        "voltage": [mu + "V", "mV", "V", "kV", "MV"],
        "conductivity": ["S/cm", mu + "S/cm", "mS/cm"],
        "carbon_dioxide": ["ppm"],
        "volatile_organic_compounds_parts": ["ppm", "ppb"],
        "pm1": [mu + "g/m³"],
        "pm25": [mu + "g/m³"],
        "pm10": [mu + "g/m³"],
        "irradiance": ["W/m²", "BTU/(h⋅ft²)"],
        "wind_speed": ["Beaufort", "ft/s", "in/s", "km/h", "kn", "m/s", "mph", "mm/s"],
        "wind_direction": ["°"],
        "distance": ["km", "m", "cm", "mm", "mi", "yd", "in", "ft"],
        "weight": ["g", "kg", "mg", mu + "g", "oz", "lb", "st"],
        "signal_strength": ["dB", "dBm"],
        "duration": ["d", "h", "min", "s", "ms"],
        "volatile_organic_compounds": [mu + "g/m³"],
        "energy": ["GJ", "GWh", "Gcal", "J", "MJ", "MWh", "Mcal", "TWh", "Wh", "cal", "kJ", "kWh", "kcal", "mWh"],
        "power": ["GW", "MW", "TW", "W", "kW", "mW"],
        "current": ["A", "mA"],
        "speed": ["Beaufort", "ft/s", "in/d", "in/h", "in/s", "km/h", "kn", "m/s", "mm/d", "mm/h", "mm/s", "mph"],
        "volume_flow_rate": ["L/min", "ft³/min", "gal/min", "mL/s", "m³/h"],
        "volume": ["CCF", "L", "fl. oz.", "ft³", "gal", "mL", "m³"],
        "volume_storage": ["CCF", "L", "fl. oz.", "ft³", "gal", "mL", "m³"],
        "water": ["CCF", "L", "ft³", "gal", "m³"],
        "gas": ["CCF", "ft³", "m³"],
        "precipitation": ["cm", "in", "mm"],
    ]

    static let stateClasses: [String: Set<String>] = [
        "temperature": ["measurement"], "humidity": ["measurement"], "moisture": ["measurement"],
        "battery": ["measurement"], "pressure": ["measurement"], "illuminance": ["measurement"],
        "voltage": ["measurement"], "conductivity": ["measurement"], "carbon_dioxide": ["measurement"],
        "volatile_organic_compounds_parts": ["measurement"], "pm1": ["measurement"], "pm25": ["measurement"],
        "pm10": ["measurement"], "irradiance": ["measurement"], "wind_speed": ["measurement"],
        "wind_direction": [],
        "distance": ["measurement", "total", "total_increasing"],
        "weight": ["measurement", "total", "total_increasing"],
        "signal_strength": ["measurement"],
        "duration": ["measurement", "total", "total_increasing"],
        "volatile_organic_compounds": ["measurement"],
        "energy": ["total", "total_increasing"],
        "power": ["measurement"], "current": ["measurement"], "speed": ["measurement"],
        "volume_flow_rate": ["measurement"],
        "volume": ["total", "total_increasing"],
        "volume_storage": ["measurement"],
        "water": ["total", "total_increasing"],
        "gas": ["total", "total_increasing"],
        "precipitation": ["measurement", "total", "total_increasing"],
    ]

    /// HA's binary sensor device classes (`BinarySensorDeviceClass`, homeassistant/components/binary_sensor).
    static let binarySensorClasses: Set<String> = [
        "battery", "battery_charging", "carbon_monoxide", "cold", "connectivity", "door", "garage_door", "gas", "heat",
        "light", "lock", "moisture", "motion", "moving", "occupancy", "opening", "plug", "power", "presence",
        "problem", "running", "safety", "smoke", "sound", "tamper", "update", "vibration", "window",
    ]

    /// Whether HA accepts the three together (no device class: any unit, and a state class or none).
    static func accepts(deviceClass: String?, unit: String?, stateClass: String?) -> Bool {
        guard let deviceClass else {
            return stateClass == nil || ["measurement", "total", "total_increasing"].contains(stateClass ?? "")
        }
        guard let units = units[deviceClass], let states = stateClasses[deviceClass], let unit else { return false }
        guard units.contains(unit) else { return false }
        if let stateClass { return states.contains(stateClass) }
        return true
    }
}
