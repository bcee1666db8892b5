// Peripherals that speak real sensor profiles (SimulatedService+Profiles.swift), and the fixed set the demo and
// the end-to-end tests use.

extension SimulatedDevice {
    /// A Xiaomi Mi Flora (HHCCJCY01) plant sensor: advertises as "Flower care" with a public address and serves
    /// `SimulatedService.miFloraData`. A correct client writes `A0 1F` to 0x1a00 on every connection before
    /// reading 0x1a01; one that forgets reads the stale `AA BB CC DD EE FF 99 88 77 66 00…`. With a `history`
    /// (by default 300 hourly entries), also `SimulatedService.miFloraHistory`.
    public static func miFlora(
        address: String, name: String = "Flower care", adapter: String = "hci0", celsius: Double = 23.4,
        lux: UInt32 = 1_234, moisture: UInt8 = 41, conductivity: UInt16 = 567, battery: UInt8 = 97,
        firmware: String = "3.2.1", history: SimulatedHistory? = SimulatedHistory()
    ) -> SimulatedDevice {
        SimulatedDevice(
            address: address, addressType: .public, name: name, adapter: adapter, rssi: -70,
            services: [
                .miFloraData(
                    celsius: celsius, lux: lux, moisture: moisture, conductivity: conductivity, battery: battery,
                    firmware: firmware)
            ] + (history.map { [.miFloraHistory($0)] } ?? []))
    }

    /// A Xiaomi LYWSD03MMC thermometer/hygrometer on stock firmware: `SimulatedService.lywsd03mmc`, notifying a
    /// 5-byte reading every `notifyInterval` once a client called StartNotify, with a clock that starts at
    /// `clockStart` (Unix seconds; 2000-01-01 by default) until a client sets it.
    public static func lywsd03mmc(
        address: String, name: String = "LYWSD03MMC", adapter: String = "hci0", celsius: Double = 22.51,
        humidity: UInt8 = 48, millivolts: UInt16 = 2_981, notifyInterval: Duration = .seconds(1),
        clockStart: UInt32 = 946_684_800
    ) -> SimulatedDevice {
        SimulatedDevice(
            address: address, addressType: .public, name: name, adapter: adapter, rssi: -65,
            services: [
                .lywsd03mmc(
                    celsius: celsius, humidity: humidity, millivolts: millivolts, notifyInterval: notifyInterval,
                    clockStart: clockStart)
            ])
    }

    /// An Environmental Sensing device: Temperature 0x2A6E and Humidity 0x2A6F in 0x181A (`celsius` may be
    /// negative) and a vendor probe temperature readable only through its 0x2904 descriptor
    /// (`SimulatedService.presentationFormatProbe`).
    public static func environmentalSensor(
        address: String, name: String = "Env-Sensor", adapter: String = "hci0", celsius: Double = -7.25,
        humidity: Double = 55.5, probeCelsius: Double = -18.25
    ) -> SimulatedDevice {
        SimulatedDevice(
            address: address, name: name, adapter: adapter, rssi: -55, txPower: 0,
            services: [
                .environmentalSensing(celsius: celsius, humidity: humidity),
                .presentationFormatProbe(celsius: probeCelsius),
            ])
    }

    /// A heart rate strap: `SimulatedService.heartRate` (0x2A37 notifications, Body Sensor Location "chest").
    public static func heartRateMonitor(
        address: String, name: String = "HR-Monitor", adapter: String = "hci0", bpm: UInt8 = 72,
        notifyInterval: Duration = .seconds(1)
    ) -> SimulatedDevice {
        SimulatedDevice(
            address: address, name: name, adapter: adapter, rssi: -50, appearance: 0x0341,
            services: [.heartRate(bpm: bpm, notifyInterval: notifyInterval)])
    }

    /// A health thermometer: `SimulatedService.healthThermometer` (0x2A1C indications, IEEE-11073 FLOAT).
    public static func thermometer(
        address: String, name: String = "Thermometer", adapter: String = "hci0", celsius: Double = 36.54,
        notifyInterval: Duration = .seconds(1)
    ) -> SimulatedDevice {
        SimulatedDevice(
            address: address, name: name, adapter: adapter, rssi: -58, appearance: 0x0300,
            services: [.healthThermometer(celsius: celsius, notifyInterval: notifyInterval)])
    }

    /// The addresses of `[SimulatedDevice].profileSensors`. They are outside `.sensors(count:)`'s range
    /// (`C0:FF:EE:00:HH:LL`, up to `00:FF:FF`), so both sets fit on one adapter at any count.
    public enum ProfileAddress {
        public static let miFlora = "C0:FF:EE:01:00:01"
        public static let lywsd03mmc = "C0:FF:EE:01:00:02"
        public static let environmentalSensor = "C0:FF:EE:01:00:03"
        public static let heartRateMonitor = "C0:FF:EE:01:00:04"
        public static let thermometer = "C0:FF:EE:01:00:05"
    }
}

extension Array where Element == SimulatedDevice {
    /// One sensor per profile, with the presets' default readings, cached by bluetoothd and advertising:
    ///
    /// | address | name | what a client reads (value 0) |
    /// |---|---|---|
    /// | C0:FF:EE:01:00:01 | Flower care | after writing A0 1F to 0x1a00: 23.4 °C, 1234 lux, 41 %, 567 µS/cm; 0x1a02:
    /// 97 %, "3.2.1"; history (0x1206): 300 hourly entries, device time 2,158,345 s at start |
    /// | C0:FF:EE:01:00:02 | LYWSD03MMC | notifications: 22.51 °C, 48 %, 2.981 V; clock (ebe0ccb7-…) at 2000-01-01 |
    /// | C0:FF:EE:01:00:03 | Env-Sensor | 0x2A6E −7.25 °C, 0x2A6F 55.5 %, probe (via 0x2904) −18.25 °C |
    /// | C0:FF:EE:01:00:04 | HR-Monitor | 0x2A37 notifications: 72 bpm, RR 853/1024 s |
    /// | C0:FF:EE:01:00:05 | Thermometer | 0x2A1C indications: 36.54 °C |
    ///
    /// `notifyInterval` sets the pace of the LYWSD03MMC, heart rate and thermometer notifications.
    public static func profileSensors(adapter: String = "hci0", notifyInterval: Duration = .seconds(1))
        -> [SimulatedDevice]
    {
        typealias Address = SimulatedDevice.ProfileAddress
        return [
            .miFlora(address: Address.miFlora, adapter: adapter),
            .lywsd03mmc(address: Address.lywsd03mmc, adapter: adapter, notifyInterval: notifyInterval),
            .environmentalSensor(address: Address.environmentalSensor, adapter: adapter),
            .heartRateMonitor(address: Address.heartRateMonitor, adapter: adapter, notifyInterval: notifyInterval),
            .thermometer(address: Address.thermometer, adapter: adapter, notifyInterval: notifyInterval),
        ]
    }
}
