import Testing
@testable import MQTTBridge

@Suite struct SensorClassTableTests {
    @Test func everyRowOfTheTableIsAPairHomeAssistantAccepts() {
        for row in SensorClassTable.rows {
            #expect(HomeAssistantAcceptedPairs.units[row.deviceClass] != nil, "\(row.deviceClass) is not in HA's table")
            for unit in row.units {
                #expect(
                    HomeAssistantAcceptedPairs.accepts(
                        deviceClass: row.deviceClass, unit: unit, stateClass: row.stateClass),
                    "\(row.deviceClass) with \(unit) and \(row.stateClass ?? "no state class")")
            }
        }
    }

    @Test(arguments: [
        ("temperature", "°C", "temperature"), ("dew_point", "°C", "temperature"), ("humidity", "%", "humidity"),
        ("soil_moisture", "%", "moisture"), ("pressure", "Pa", "pressure"), ("pressure", "hPa", "pressure"),
        ("illuminance", "lx", "illuminance"), ("battery", "%", "battery"), ("voltage", "V", "voltage"),
        ("battery_voltage", "mV", "voltage"), ("conductivity", "µS/cm", "conductivity"),
        ("co2", "ppm", "carbon_dioxide"),
        ("voc", "ppb", "volatile_organic_compounds_parts"), ("pm1", "µg/m³", "pm1"), ("pm2_5", "µg/m³", "pm25"),
        ("pm10", "µg/m³", "pm10"), ("irradiance", "W/m²", "irradiance"), ("true_wind_speed", "m/s", "wind_speed"),
        ("elevation", "m", "distance"), ("weight", "kg", "weight"), ("weight", "lb", "weight"),
        ("rssi", "dBm", "signal_strength"), ("true_wind_direction", "°", "wind_direction"),
        // From advertisements (BTHome, pvvx, MiBeacon, Ruuvi), numbered when one packet has two of a kind.
        ("temperature_2", "°C", "temperature"), ("pm2_5_2", "µg/m³", "pm25"), ("co2_1", "ppm", "carbon_dioxide"),
        ("voc", "µg/m³", "volatile_organic_compounds"), ("energy", "kWh", "energy"), ("power", "W", "power"),
        ("current", "A", "current"), ("speed", "m/s", "speed"), ("volume", "L", "volume"), ("volume", "mL", "volume"),
        ("volume_flow_rate", "m³/h", "volume_flow_rate"), ("water", "L", "water"), ("gas", "m³", "gas"),
        ("volume_storage", "L", "volume_storage"), ("precipitation", "mm", "precipitation"),
        ("duration", "s", "duration"), ("no_motion_duration", "s", "duration"), ("distance", "mm", "distance"),
        ("mass", "lb", "weight"), ("tx_power", "dBm", "signal_strength"), ("battery_voltage", "V", "voltage"),
    ])
    func readingsGetTheirDeviceClassWithAUnitAndStateClassHomeAssistantAccepts(
        name: String, unit: String, deviceClass: String
    ) {
        let classification = SensorClassTable.classify(name: name, unit: unit, isText: false)
        #expect(classification.deviceClass == deviceClass)
        #expect(
            HomeAssistantAcceptedPairs.accepts(
                deviceClass: classification.deviceClass, unit: classification.unit,
                stateClass: classification.stateClass))
    }

    @Test func readingsWithoutAClassGetNoDeviceClassAndTextGetsNoStateClass() {
        let heartRate = SensorClassTable.classify(name: "heart_rate", unit: "bpm", isText: false)
        #expect(heartRate == .init(deviceClass: nil, unit: "bpm", stateClass: "measurement"))
        let uvIndex = SensorClassTable.classify(name: "uv_index", unit: nil, isText: false)
        #expect(uvIndex == .init(deviceClass: nil, unit: nil, stateClass: "measurement"))
        let firmware = SensorClassTable.classify(name: "firmware_revision", unit: nil, isText: true)
        #expect(firmware == .init(deviceClass: nil, unit: nil, stateClass: nil))
        // A percentage that is neither humidity, moisture nor battery: no class rather than a wrong one.
        let duty = SensorClassTable.classify(name: "duty_cycle", unit: "%", isText: false)
        #expect(duty.deviceClass == nil && duty.unit == "%")
        // HA has no class for these: acceleration, rotation, a gyroscope, formaldehyde.
        for (name, unit) in [
            ("acceleration", "m/s²"), ("acceleration_x", "G"), ("rotation", "°"), ("gyroscope", "°/s"),
            ("formaldehyde", "mg/m³"),
        ] {
            let classification = SensorClassTable.classify(name: name, unit: unit, isText: false)
            #expect(classification == .init(deviceClass: nil, unit: unit, stateClass: "measurement"), "\(name)")
        }
        #expect(SensorClassTable.baseName("pm2_5") == "pm2")  // why the exact name is tried first
        #expect(SensorClassTable.baseName("_2") == "_2" && SensorClassTable.baseName("door_") == "door_")
    }

    @Test func theGreekMuBecomesTheMicroSignEveryHomeAssistantAccepts() {
        #expect(SensorClassTable.normaliseUnit("\u{03BC}g/m³") == "\u{00B5}g/m³")
        #expect(SensorClassTable.classify(name: "pm10", unit: "\u{03BC}g/m³", isText: false).unit == "\u{00B5}g/m³")
        #expect(
            SensorClassTable.classify(name: "conductivity", unit: "\u{00B5}S/cm", isText: false).unit == "\u{00B5}S/cm")
    }
}
