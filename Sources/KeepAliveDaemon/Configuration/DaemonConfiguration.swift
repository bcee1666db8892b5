public import KeepAlive
public import Polling

/// What `keepalive run` does, as read from its YAML file (see `ConfigurationLoader` and the README's
/// "Configuration reference").
///
/// ```swift
/// let configuration = try ConfigurationLoader.load(path: "/etc/keepalive/keepalive.yaml")
/// let peripherals = configuration.peripheralSpecs()
/// ```
public struct DaemonConfiguration: Sendable, Hashable {
    /// Where records go.
    public enum Output: Sendable, Hashable, CustomStringConvertible {
        case standardOutput
        case file(String)
        /// No JSON Lines (`output: none`): records go to MQTT only.
        case none

        public var description: String {
            switch self {
            case .standardOutput: "-"
            case .file(let path): path
            case .none: "none"
            }
        }
    }

    /// One device to poll.
    public struct Device: Sendable, Hashable {
        public var name: String
        /// Upper-case `AA:BB:CC:DD:EE:FF`, checked with libbluetooth's `bachk`.
        public var address: String
        /// The adapter, when not the file's default.
        public var adapter: String?
        public var interval: Duration?
        public var budget: Duration?
        /// This device's floor (`min_interval`), when not the file's: a sensor that bears faster polling, or one
        /// that must be spared more.
        public var minInterval: Duration?
        public var reads: [BluetoothUUID]
        public var writes: [PeripheralSpec.Write]
        public var notifications: [PeripheralSpec.Subscription]
        /// How read and notified values become readings, where the SIG table is not the answer.
        public var decoding: [BluetoothUUID: PeripheralSpec.Decoding]
        /// The profile it was built from (`profile: mi-flora`), if any.
        public var profile: String?
        /// From its profile: for people and Home Assistant's device registry.
        public var manufacturer: String?
        public var model: String?
        /// Shared with other gateways of the fleet (`shared: true`): polled only while this gateway holds it.
        public var shared: Bool
        /// `advertisements:` with its `key:`: a passive sensor when it has nothing to read, write or listen to.
        public var advertising: PeripheralSpec.Advertising?
        /// `poll_when:`, when not the file's.
        public var pollWhen: PeripheralSpec.PollWhen?
        /// `history:`: its on-device history, downloaded now and then (its profile says how).
        public var history: History?
        /// `clock_sync:`: its clock set from the gateway's now and then (its profile says where).
        public var clockSync: ClockSync?
        /// Where the entry starts in the file, for messages about it.
        public var location: SourceLocation?

        public init(
            name: String,
            address: String,
            adapter: String? = nil,
            interval: Duration? = nil,
            budget: Duration? = nil,
            minInterval: Duration? = nil,
            reads: [BluetoothUUID] = [],
            writes: [PeripheralSpec.Write] = [],
            notifications: [PeripheralSpec.Subscription] = [],
            decoding: [BluetoothUUID: PeripheralSpec.Decoding] = [:],
            profile: String? = nil,
            manufacturer: String? = nil,
            model: String? = nil,
            shared: Bool = false,
            location: SourceLocation? = nil
        ) {
            self.name = name
            self.address = address
            self.adapter = adapter
            self.interval = interval
            self.budget = budget
            self.minInterval = minInterval
            self.reads = reads
            self.writes = writes
            self.notifications = notifications
            self.decoding = decoding
            self.profile = profile
            self.manufacturer = manufacturer
            self.model = model
            self.shared = shared
            self.location = location
        }
    }

    public var interval: Duration = .seconds(30)
    /// The floor of every interval (`min_interval`): the shortest interval the file may give a device and an
    /// `interval/set` command may set, and the least time between two polls on command of one device. Anyone who
    /// can publish to the broker can send commands; without a floor one made a sensor poll without pause (≈ 700
    /// windows a second at `1ms`).
    public var minInterval: Duration = Self.defaultMinInterval
    /// 5 s: a sensor on a coin cell polled more often than this is being worn down, not kept alive.
    public static let defaultMinInterval = Duration.seconds(5)
    /// `poll_when:` for every device that does not say: `.always` (the default) or `.heard`.
    public var pollWhen: PeripheralSpec.PollWhen = .always
    public var jitter: Duration = .zero
    /// `nil`: the core's default (the smaller of 20 s and two thirds of the interval).
    public var windowBudget: Duration?
    public var lowPower = LowPowerPolicy()
    /// Where the power state comes from.
    public enum PowerMode: String, Sendable, Hashable {
        /// UPower and power-profiles-daemon on the bus, else /sys/class/power_supply, else always normal.
        case auto
        /// Always low power (a gateway on a small battery with no power daemon).
        case on
        /// Never low power.
        case off
    }

    public var powerMode = PowerMode.auto
    /// Battery percentage at or below which (while discharging) the state is critical.
    public var criticalPercentage = 10
    /// The default adapter of every device.
    public var adapter = "hci0"
    /// Simultaneous connections per adapter.
    public var maxConnections = 3
    /// Slot-aware placement of the devices' grids (``PollEngine/Configuration/placement``); `placement: false`
    /// lays every grid from the start, for setups that want their polls together.
    public var placement = true
    public var output = Output.standardOutput
    public var devices: [Device] = []
    /// The MQTT bridge, when configured (README: MQTT).
    public var mqtt: MQTT?
    /// Several gateways sharing devices through the broker, when configured (README: Several gateways).
    public var fleet: Fleet?
    /// Where the daemon's metrics go, when configured: a node_exporter textfile, an HTTP endpoint.
    public var metrics: Metrics?
    /// `state_directory:`: where the daemon keeps what must outlive it besides the spool (the deferred tasks'
    /// pending list, the history positions). Nil: systemd's `$STATE_DIRECTORY`, else /var/lib/keepalive.
    public var stateDirectory: String?
    /// The healing ladder's bounds, and `adapter_power: on` as ``HealingPolicy/powerOn`` (README: Healing).
    public var healing = HealingPolicy()
    /// The file it came from, if any.
    public var path: String?
    /// Where the file wrote each value, by field (`interval`, `devices[2].budget`): ``validate()`` points its errors
    /// there. Empty for a configuration made in code.
    public var origins: [String: Origin] = [:]

    public init() {}

    /// The scheduler's configuration.
    public var keepAliveConfiguration: KeepAlive.Configuration {
        KeepAlive.Configuration(interval: interval, windowBudget: windowBudget, jitter: jitter, lowPower: lowPower)
    }

    /// The poll engine's configuration.
    public var pollEngineConfiguration: PollEngine.Configuration {
        PollEngine.Configuration(maxConnections: maxConnections, placement: placement)
    }

    /// One spec per device, adapters resolved.
    public func peripheralSpecs() -> [PeripheralSpec] {
        devices.map { device in
            PeripheralSpec(
                name: device.name,
                peripheral: Peripheral(address: device.address, adapter: device.adapter ?? adapter),
                interval: device.interval,
                budget: device.budget,
                writes: device.writes,
                reads: device.reads,
                notifications: device.notifications,
                decoding: device.decoding,
                advertising: device.advertising,
                pollWhen: device.advertising != nil && device.reads.isEmpty && device.writes.isEmpty
                    && device.notifications.isEmpty ? .always : device.pollWhen ?? pollWhen
            )
        }
    }

    /// The floor of `device`'s interval and of its polls on command: its own `min_interval`, else the file's.
    public func minInterval(of device: Device) -> Duration {
        device.minInterval ?? minInterval
    }

    /// The adapters the devices use, sorted.
    public var adapters: [String] {
        Set(devices.map { $0.adapter ?? adapter }).sorted()
    }
}

/// A place in a configuration file: 1-based line and column.
public struct SourceLocation: Sendable, Hashable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int

    public init(file: String, line: Int, column: Int) {
        self.file = file
        self.line = line
        self.column = column
    }

    public var description: String { "\(file):\(line):\(column)" }
}

/// A configuration file that cannot be used, with where and why: `keepalive.yaml:12:14: devices[1].address: …`.
public struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of mistake: tests and tools match on it, people read the message.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public var description: String { rawValue }
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The file could not be read.
        public static let unreadable = Kind(rawValue: "unreadable")
        /// Not YAML.
        public static let syntax = Kind(rawValue: "syntax")
        /// A value of the wrong type (a list where a string belongs…).
        public static let wrongType = Kind(rawValue: "wrongType")
        /// A key the format does not have (usually a typo).
        public static let unknownKey = Kind(rawValue: "unknownKey")
        /// A required key is missing.
        public static let missingKey = Kind(rawValue: "missingKey")
        public static let badAddress = Kind(rawValue: "badAddress")
        public static let badUUID = Kind(rawValue: "badUUID")
        public static let badDuration = Kind(rawValue: "badDuration")
        /// A value of the right type that is not allowed (budget ≥ interval, a duplicate name, 0 connections…).
        public static let invalidValue = Kind(rawValue: "invalidValue")
    }

    public var kind: Kind
    public var location: SourceLocation
    /// The field, as a path: `devices[2].read[0]`; empty for the file as a whole.
    public var field: String
    public var message: String

    public init(_ kind: Kind, at location: SourceLocation, field: String, _ message: String) {
        self.kind = kind
        self.location = location
        self.field = field
        self.message = message
    }

    public var description: String {
        field.isEmpty ? "\(location): \(message)" : "\(location): \(field): \(message)"
    }
}
