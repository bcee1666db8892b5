// What the simulator simulates: adapters, devices with their GATT databases, latencies, quirks.

extension BlueZSimulator {
    /// Everything a simulator starts from.
    ///
    /// ```swift
    /// var configuration = BlueZSimulator.Configuration(adapters: ["hci0"], devices: .sensors(count: 5))
    /// configuration.timeScale = 0.01                   // a 30 s ATT timeout takes 300 ms
    /// configuration.quirks = [.servicesResolvedBeforeGATT]
    /// ```
    public struct Configuration: Sendable {
        public var adapters: [SimulatedAdapter]
        public var devices: [SimulatedDevice]
        /// Every latency is multiplied by this (1 = bluetoothd's real timing).
        public var timeScale: Double
        public var latencies: Latencies
        public var quirks: Set<Quirk>
        /// bluetoothd's battery plugin (on by default): it adds `org.bluez.Battery1` to a connected device
        /// with a 0x180F service (10–60 ms after the GATT objects) and removes it as soon as Disconnect is
        /// called. The service's GATT objects stay exported (as bluetoothd 5.66 does in the qemu lab). Off is
        /// `bluetoothd -P battery`.
        public var batteryPlugin: Bool
        /// The well-known name of the control interface (`io.keepalive.Simulator`); nil: no control interface.
        public var controlName: String?

        public init(
            adapters: [SimulatedAdapter] = ["hci0"], devices: [SimulatedDevice] = [], timeScale: Double = 1,
            latencies: Latencies = Latencies(), quirks: Set<Quirk> = [], batteryPlugin: Bool = true,
            controlName: String? = BlueZSimulator.controlName
        ) {
            self.adapters = adapters
            self.devices = devices
            self.timeScale = timeScale
            self.latencies = latencies
            self.quirks = quirks
            self.batteryPlugin = batteryPlugin
            self.controlName = controlName
        }
    }

    /// How long things take on real hardware (docs/BLUEZ.md), before `Configuration.timeScale`.
    public struct Latencies: Sendable {
        /// Connect → Connected=true (70–160 ms seen).
        public var connect: Duration = .milliseconds(100)
        /// Connect to an absent device → `le-connection-abort-by-local`.
        public var connectAbort: Duration = .milliseconds(41_600)
        public var read: Duration = .milliseconds(10)
        public var write: Duration = .milliseconds(10)
        /// Disconnect() → its reply (then Connected=false).
        public var disconnect: Duration = .seconds(2)
        /// StartDiscovery → first devices found.
        public var discovery: Duration = .milliseconds(30)
        /// Period of RSSI PropertiesChanged while discovering.
        public var rssiInterval: Duration = .seconds(1)
        /// A subscription (the CCCD written, by StartNotify or by bluetoothd re-enabling a session on a new
        /// connection) → the first notification or indication: the peripheral sends its current value at the
        /// next connection event (Linux's default LE connection interval is 30–50 ms), then one per
        /// `notifyInterval`; never later than `notifyInterval`. With the first value a whole period after the
        /// subscription, a client listening for one period (the demo's heart-rate strap and thermometer, issue
        /// #35) stopped listening just before it came, poll after poll.
        public var firstNotification: Duration = .milliseconds(50)
        /// ATT transaction timeout (a hung read fails and the link drops).
        public var attTimeout: Duration = .seconds(30)
        /// A peripheral powered off drops its link after this: its controller ends the link (HCI reason 0x15,
        /// "power off"), 10–211 ms after the command in the qemu lab; no supervision timeout is involved.
        public var powerOffLinkLoss: Duration = .milliseconds(100)
        /// After a crash the kernel keeps the links; the next bluetoothd sees them up until the kernel drops them
        /// (1.5–2 s after the crash in the qemu lab).
        public var kernelLinkAfterCrash: Duration = .milliseconds(1_750)
        /// Graceful restart: how long org.bluez stays off the bus.
        public var restart: Duration = .seconds(1)

        public init() {}
    }

    /// Real-bluetoothd behaviours a robust client must handle, off unless asked for.
    public enum Quirk: String, Sendable, Hashable, CaseIterable {
        /// On a first connection ServicesResolved=true arrives 5–40 ms *before* the GATT InterfacesAdded.
        case servicesResolvedBeforeGATT = "services-before-gatt"
        /// The Connected=true PropertiesChanged is never emitted (the property is true when read).
        case noConnectedSignal = "no-connected-signal"
    }
}

/// An adapter `/org/bluez/<name>`.
public struct SimulatedAdapter: Sendable, ExpressibleByStringLiteral {
    public var name: String
    public var address: String
    public var alias: String
    public var powered: Bool

    public init(name: String, address: String? = nil, alias: String? = nil, powered: Bool = true) {
        self.name = name
        let index = UInt8(name.drop { !$0.isNumber }) ?? 0
        self.address = address ?? "00:1A:7D:DA:71:" + Hex.byte(index)
        self.alias = alias ?? "keepalive-sim #\(index + 1)"
        self.powered = powered
    }

    public init(stringLiteral name: String) {
        self.init(name: name)
    }
}

/// A peripheral: what it advertises and its GATT database.
///
/// ```swift
/// SimulatedDevice(address: "C0:FF:EE:00:00:01", name: "Sensor-001", services: [.battery(level: 87)])
/// ```
public struct SimulatedDevice: Sendable {
    public enum AddressType: String, Sendable { case `public`, random }

    /// `AA:BB:CC:DD:EE:FF`, upper case.
    public var address: String
    public var addressType: AddressType
    public var name: String?
    public var adapter: String
    /// The RSSI reported while discovering (jitters by ±3 dBm).
    public var rssi: Int16
    public var txPower: Int16?
    public var manufacturerData: [UInt16: [UInt8]]
    /// Service data, keyed by 128-bit UUID.
    public var serviceData: [String: [UInt8]]
    public var appearance: UInt16?
    public var services: [SimulatedService]
    public var paired: Bool
    public var trusted: Bool
    /// Whether bluetoothd knows the device at start (a cached/bonded device) instead of finding it by discovery.
    public var cached: Bool
    /// Whether it advertises and accepts connections; an absent device times out connects. A passive sensor
    /// (`advertisement`) that does not advertise is silent.
    public var advertising: Bool
    /// A passive sensor's advertisements (BTHome, pvvx, MiBeacon, Ruuvi): while its adapter discovers, they
    /// update `ServiceData` or `ManufacturerData` and `RSSI` one advertisement at a time, as bluetoothd reports
    /// them. Such a device gets no periodic RSSI of its own.
    public var advertisement: SimulatedAdvertisement?

    public init(
        address: String, addressType: AddressType = .random, name: String? = nil, adapter: String = "hci0",
        rssi: Int16 = -60, txPower: Int16? = nil, manufacturerData: [UInt16: [UInt8]] = [:],
        serviceData: [String: [UInt8]] = [:], appearance: UInt16? = nil, services: [SimulatedService] = [],
        paired: Bool = false, trusted: Bool = false, cached: Bool = true, advertising: Bool = true,
        advertisement: SimulatedAdvertisement? = nil
    ) {
        self.address = address.uppercased()
        self.addressType = addressType
        self.name = name
        self.adapter = adapter
        self.rssi = rssi
        self.txPower = txPower
        self.manufacturerData = manufacturerData
        self.serviceData = serviceData.reduce(into: [:]) { $0[SimulatedUUID.full($1.key)] = $1.value }
        self.appearance = appearance
        self.services = services
        self.paired = paired
        self.trusted = trusted
        self.cached = cached
        self.advertising = advertising
        self.advertisement = advertisement
    }
}

/// A primary GATT service.
public struct SimulatedService: Sendable {
    /// 16-bit (`"180F"`) or 128-bit UUID; stored as BlueZ writes it, 128-bit lower case.
    public var uuid: String
    public var primary: Bool
    public var characteristics: [SimulatedCharacteristic]

    public init(uuid: String, primary: Bool = true, characteristics: [SimulatedCharacteristic]) {
        self.uuid = SimulatedUUID.full(uuid)
        self.primary = primary
        self.characteristics = characteristics
    }
}

/// A characteristic: flags as BlueZ spells them and where its values come from.
public struct SimulatedCharacteristic: Sendable {
    public var uuid: String
    /// `read`, `write`, `write-without-response`, `notify`, `indicate`… (GattCharacteristic1.Flags).
    public var flags: [String]
    public var value: ValueGenerator
    /// Period of notifications while a notify session exists and the device is connected. Not multiplied by
    /// `Configuration.timeScale`: it is the peripheral's own pace, which a test picks directly.
    public var notifyInterval: Duration
    /// Descriptors after the CCCD (0x2902), which the simulator adds by itself to a notify/indicate
    /// characteristic: a Characteristic Presentation Format (0x2904), a User Description (0x2901)…
    public var descriptors: [SimulatedDescriptor]
    /// Whether the peripheral forgets a written value when the link drops (a mode switch such as the Mi Flora's
    /// 0x1a00): reads on the next connection answer the configured value again.
    public var forgetsWritesOnDisconnect: Bool
    /// Reads answer `RequiredWrite.placeholder` until a client wrote the required bytes to another
    /// characteristic of the device (on this connection, if that one forgets writes on disconnect).
    public var requiredWrite: RequiredWrite?
    /// A part the device's own state answers (a history, a clock) instead of `value`: set by the presets that
    /// need one (`SimulatedService.miFloraHistory`, `.lywsd03mmc`).
    var role: CharacteristicRole?

    public init(
        uuid: String, flags: [String], value: ValueGenerator, notifyInterval: Duration = .seconds(1),
        descriptors: [SimulatedDescriptor] = [], forgetsWritesOnDisconnect: Bool = false,
        requiredWrite: RequiredWrite? = nil
    ) {
        self.uuid = SimulatedUUID.full(uuid)
        self.flags = flags
        self.value = value
        self.notifyInterval = notifyInterval
        self.descriptors = descriptors
        self.forgetsWritesOnDisconnect = forgetsWritesOnDisconnect
        self.requiredWrite = requiredWrite
    }

    /// A peripheral that serves real values only after a command: until `bytes` were written to the
    /// characteristic `characteristic` of the same device, reads get `placeholder` (and the value generator's
    /// sequence does not advance, so the first real value is the generator's value 0).
    public struct RequiredWrite: Sendable {
        /// 16-bit or 128-bit UUID of the characteristic to write.
        public var characteristic: String
        public var bytes: [UInt8]
        public var placeholder: [UInt8]

        public init(characteristic: String, bytes: [UInt8], placeholder: [UInt8]) {
            self.characteristic = SimulatedUUID.full(characteristic)
            self.bytes = bytes
            self.placeholder = placeholder
        }
    }

    var canNotify: Bool { flags.contains("notify") || flags.contains("indicate") }
}

/// Where a characteristic's values come from; `sequence` counts reads (or notifications) from 0.
public enum ValueGenerator: Sendable {
    /// The same bytes every time (until a write replaces them).
    case constant([UInt8])
    /// A UInt32 little-endian counter: 0, 1, 2… (notifications count on their own, without gaps).
    case counter
    /// A battery level in percent (one byte).
    case batteryLevel(UInt8)
    /// A temperature in 0.01 °C as Int16 little-endian (0x2A6E), drifting by 0.01 °C a step.
    case temperature(celsius: Double)
    /// Anything else.
    case custom(@Sendable (_ sequence: UInt64) -> [UInt8])

    func value(_ sequence: UInt64) -> [UInt8] {
        switch self {
        case .constant(let bytes): return bytes
        case .counter:
            let value = UInt32(truncatingIfNeeded: sequence)
            return [UInt8(value & 0xff), UInt8((value >> 8) & 0xff), UInt8((value >> 16) & 0xff), UInt8(value >> 24)]
        case .batteryLevel(let level): return [level]
        case .temperature(let celsius):
            let hundredths = Int16(clamping: Int((celsius * 100).rounded()) + Int(sequence % 100))
            let bits = UInt16(bitPattern: hundredths)
            return [UInt8(bits & 0xff), UInt8(bits >> 8)]
        case .custom(let make): return make(sequence)
        }
    }
}

extension SimulatedService {
    /// Battery Service 0x180F with Battery Level 0x2A19 (read, notify).
    public static func battery(level: UInt8 = 100) -> SimulatedService {
        SimulatedService(
            uuid: "180F",
            characteristics: [
                SimulatedCharacteristic(uuid: "2A19", flags: ["read", "notify"], value: .batteryLevel(level))
            ])
    }

    /// Environmental Sensing 0x181A with Temperature 0x2A6E (read, notify).
    public static func environmentalSensing(celsius: Double = 21.5) -> SimulatedService {
        SimulatedService(
            uuid: "181A",
            characteristics: [
                SimulatedCharacteristic(uuid: "2A6E", flags: ["read", "notify"], value: .temperature(celsius: celsius))
            ])
    }

    /// The keep-alive test service: a counter (read, notify), a setting (read, write, write-without-response)
    /// and a write-only command point.
    public static func keepAlive(notifyInterval: Duration = .milliseconds(100)) -> SimulatedService {
        SimulatedService(
            uuid: SimulatedUUID.keepAliveService,
            characteristics: [
                SimulatedCharacteristic(
                    uuid: SimulatedUUID.counter, flags: ["read", "notify"], value: .counter,
                    notifyInterval: notifyInterval),
                SimulatedCharacteristic(
                    uuid: SimulatedUUID.setting, flags: ["read", "write", "write-without-response"],
                    value: .constant([0x01])),
                SimulatedCharacteristic(uuid: SimulatedUUID.command, flags: ["write"], value: .constant([])),
            ])
    }
}

extension Array where Element == SimulatedDevice {
    /// `count` sensors `C0:FF:EE:00:HH:LL` named `Sensor-001`…, each with a battery, a temperature and the
    /// keep-alive service, cached by bluetoothd and advertising.
    public static func sensors(count: Int, adapter: String = "hci0") -> [SimulatedDevice] {
        (0..<count).map { index in
            let number = index + 1
            return SimulatedDevice(
                address: "C0:FF:EE:00:" + Hex.byte(UInt8((number >> 8) & 0xff)) + ":" + Hex.byte(UInt8(number & 0xff)),
                name: "Sensor-" + (number < 10 ? "00" : number < 100 ? "0" : "") + String(number),
                adapter: adapter, rssi: Int16(-40 - number % 50), txPower: 4,
                manufacturerData: [0xFFFF: [0x4B, 0x41, UInt8(number & 0xff)]],
                serviceData: [SimulatedUUID.keepAliveService: [UInt8(number & 0xff)]],
                services: [.battery(level: UInt8(50 + number % 50)), .environmentalSensing(), .keepAlive()])
        }
    }
}

/// UUID spelling as BlueZ writes it.
public enum SimulatedUUID {
    public static let keepAliveService = "4b410001-6b65-6570-616c-697665000000"
    public static let counter = "4b410002-6b65-6570-616c-697665000000"
    public static let setting = "4b410003-6b65-6570-616c-697665000000"
    public static let command = "4b410004-6b65-6570-616c-697665000000"

    /// Mi Flora (HHCCJCY01): the data service 0x1204 and its mode, real-time data and firmware/battery
    /// characteristics (16-bit UUIDs on the Bluetooth base, though not SIG-assigned).
    public static let miFloraDataService = full("1204")
    public static let miFloraMode = full("1a00")
    public static let miFloraRealTimeData = full("1a01")
    public static let miFloraFirmwareAndBattery = full("1a02")
    /// Mi Flora history: the service 0x1206, its control (write), data (read) and device time (read).
    public static let miFloraHistoryService = full("1206")
    public static let miFloraHistoryControl = full("1a10")
    public static let miFloraHistoryData = full("1a11")
    public static let miFloraDeviceTime = full("1a12")
    /// LYWSD03MMC (stock firmware): the data service, the temperature/humidity/voltage reading and the clock.
    public static let lywsd03mmcService = "ebe0ccb0-7a0a-4b0c-8a1a-6ff2997da3a6"
    public static let lywsd03mmcReading = "ebe0ccc1-7a0a-4b0c-8a1a-6ff2997da3a6"
    public static let lywsd03mmcTime = "ebe0ccb7-7a0a-4b0c-8a1a-6ff2997da3a6"
    /// The simulator's own vendor service whose temperature decodes only through its 0x2904 descriptor.
    public static let probeService = "4b410101-6b65-6570-616c-697665000000"
    public static let probeTemperature = "4b410102-6b65-6570-616c-697665000000"

    /// A 16- or 32-bit UUID on the Bluetooth base, or a 128-bit one lower-cased.
    public static func full(_ uuid: String) -> String {
        let lower = uuid.lowercased()
        switch lower.count {
        case 4: return "0000" + lower + "-0000-1000-8000-00805f9b34fb"
        case 8: return lower + "-0000-1000-8000-00805f9b34fb"
        default: return lower
        }
    }
}

enum Hex {
    static func byte(_ value: UInt8) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return digits.count < 2 ? "0" + digits : digits
    }

    static func handle(_ value: UInt16) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}
