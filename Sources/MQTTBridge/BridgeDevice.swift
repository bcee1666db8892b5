/// One configured BLE device as the bridge announces it.
///
/// `name` is the device's name in the daemon's configuration (the topic level, sanitised by the bridge);
/// `address` its Bluetooth address (the Home Assistant identity: renaming a device keeps its entities).
public struct BridgeDevice: Sendable, Hashable {
    /// A reading the daemon expects before any record carries it (from a profile or a configured layout), so
    /// that Home Assistant shows the sensor from the start.
    public struct ExpectedReading: Sendable, Hashable {
        public var name: String
        public var unit: String?
        /// Text readings (firmware, model) get neither unit nor state class in Home Assistant.
        public var isText: Bool
        /// Two-state readings (an advertisement's door, motion, leak) are Home Assistant binary sensors.
        public var isBoolean: Bool

        public init(name: String, unit: String? = nil, isText: Bool = false, isBoolean: Bool = false) {
            self.name = name
            self.unit = unit
            self.isText = isText
            self.isBoolean = isBoolean
        }
    }

    public var name: String
    public var address: String
    public var manufacturer: String?
    public var model: String?
    /// The configured interval (the effective one changes through ``MQTTBridge/intervalChanged(device:to:)``).
    public var interval: Duration
    /// The shortest interval an `interval/set` command may set (the configuration's `min_interval`); a shorter one
    /// is answered on the device's error topic, naming it, and never reaches the daemon. Anyone who can publish to
    /// the broker can send commands: `1ms` once made a sensor poll without pause.
    public var minimumInterval: Duration
    public var expectedReadings: [ExpectedReading]
    /// Shared by a fleet of gateways: announced to Home Assistant only while this gateway holds it (see
    /// ``MQTTBridge/holdChanged(device:holding:)``), under a gateway-independent node id, with a "Holder" sensor.
    public var shared: Bool
    /// Heard, not polled: its records come from its advertisements (BTHome, pvvx, MiBeacon, Ruuvi). Announced with
    /// a signal strength sensor (the records' `rssi`) and without what only a connection has (the "Poll now"
    /// button, the window and link times). A device whose records say they came from an advertisement is taken as
    /// passive from then on (``MQTTBridge/submit(device:sequence:succeeded:readings:advertisement:payload:)``).
    public var passive: Bool

    public init(
        name: String, address: String, manufacturer: String? = nil, model: String? = nil, interval: Duration,
        minimumInterval: Duration = .seconds(5), expectedReadings: [ExpectedReading] = [], shared: Bool = false,
        passive: Bool = false
    ) {
        self.name = name
        self.address = address
        self.manufacturer = manufacturer
        self.model = model
        self.interval = interval
        self.minimumInterval = minimumInterval
        self.expectedReadings = expectedReadings
        self.shared = shared
        self.passive = passive
    }
}
