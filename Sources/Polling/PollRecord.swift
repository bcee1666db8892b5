public import KeepAlive
public import Readings
/// Exactly one per device per tick: what was read, or a typed failure, and the window it happened in.
public struct PollRecord: Sendable {
    public enum Result: String, Sendable, Hashable {
        /// Something changed since the last poll, or notifications arrived.
        case newData
        /// The poll worked and nothing changed.
        case noData
        case failed
    }

    public struct Value: Sendable, Hashable {
        public var characteristic: BluetoothUUID
        public var bytes: [UInt8]

        public init(characteristic: BluetoothUUID, bytes: [UInt8]) {
            self.characteristic = characteristic
            self.bytes = bytes
        }
    }

    public struct Notification: Sendable, Hashable {
        public var characteristic: BluetoothUUID
        public var at: KeepAliveInstant
        public var bytes: [UInt8]

        public init(characteristic: BluetoothUUID, at: KeepAliveInstant, bytes: [UInt8]) {
            self.characteristic = characteristic
            self.at = at
            self.bytes = bytes
        }
    }

    /// Why the poll failed, in terms a person and a script both read.
    public struct Failure: Sendable, Hashable {
        /// A ``TransportError/Code`` name, or `windowExpired`, `forcedEnd`, `skipped`, `cancelled`.
        public var code: String
        public var message: String
        public var transient: Bool
        public var dbusName: String?

        public init(code: String, message: String, transient: Bool, dbusName: String? = nil) {
            self.code = code
            self.message = message
            self.transient = transient
            self.dbusName = dbusName
        }
    }

    /// Why the poll happened.
    public enum Trigger: String, Sendable, Hashable {
        /// The device's tick on its grid.
        case schedule
        /// Asked for outside the grid (``PollEngine/pollNow(_:)``: an MQTT command, an app's button).
        case command
    }

    /// Where the record's readings came from.
    public enum Source: String, Sendable, Hashable {
        /// A connection: reads, notifications.
        case connection
        /// The device's advertisements, heard without connecting (a passive sensor).
        case advertisement
        /// The device's own log, read back by a deferred task (a Mi Flora's hourly history): ``PollRecord/measured``
        /// says when.
        case history
    }

    /// What was heard of a device's advertisements during its interval.
    public struct Heard: Sendable, Hashable {
        /// Advertisements heard (a sensor repeats each measurement many times).
        public var count: Int
        /// The last signal strength heard, in dBm; `nil` when the stack gave none.
        public var rssi: Int16?
        /// The newest measurement's packet id (BTHome's packet id, pvvx's count, MiBeacon's frame counter,
        /// Ruuvi's sequence), when its format has one.
        public var packetID: UInt32?
        /// The format the newest measurement came in.
        public var format: AdvertisementFormat?

        public init(count: Int, rssi: Int16? = nil, packetID: UInt32? = nil, format: AdvertisementFormat? = nil) {
            self.count = count
            self.rssi = rssi
            self.packetID = packetID
            self.format = format
        }
    }

    public struct Window: Sendable, Hashable {
        public var id: BackgroundTaskID
        public var budget: Duration
        public var used: Duration
        public var outcome: BackgroundTaskOutcome

        public init(id: BackgroundTaskID, budget: Duration, used: Duration, outcome: BackgroundTaskOutcome) {
            self.id = id
            self.budget = budget
            self.used = used
            self.outcome = outcome
        }
    }

    public var device: String
    public var peripheral: Peripheral
    public var tick: UInt64
    public var scheduled: KeepAliveInstant
    public var fired: KeepAliveInstant
    public var result: Result
    /// In the order the spec lists its reads.
    public var values: [Value]
    public var notifications: [Notification]
    /// The values and the last notification of each characteristic, decoded: numbers with units, named
    /// (`temperature`, `battery`…), in the order the spec lists them. A value that could not be decoded is a
    /// reading with `value == nil` and its `Reading/error`; ``values`` keeps the raw bytes.
    public var readings: [Reading] = []
    public var failure: Failure?
    /// `nil` when the tick was skipped (overlap, backoff, ledger closed): no window was opened.
    public var window: Window?
    /// Connection attempts made in the window (0 when skipped or never admitted to a connection slot).
    public var attempts: Int
    /// How long the poll waited for a connection slot on its adapter: the time the other devices held all of
    /// them. `nil` for a skipped tick (no window, nothing asked for).
    public var slotWait: Duration?
    /// How long the device's link was up during the poll, over all its attempts: Bluetooth stack's own
    /// `Connected` true → false. The sensor's battery pays for this. `nil` when not known (the transport does
    /// not say, or the window ended before the disconnect did).
    public var link: Duration?
    /// The effective interval at the time (stretched in low power).
    public var interval: Duration
    public var power: PowerState
    public var trigger: Trigger = .schedule
    /// For a device shared by a fleet of gateways: which one polled it, and how it got it (nil otherwise).
    public var holder: Holder?
    /// Who held the device's link when this tick gave up for it, for example `history download`: a long link of
    /// other work (``PollEngine/withLink(to:holder:characteristics:connectTimeout:_:)``). The record is `noSlot`
    /// contention, not a failure of the device. `nil` otherwise.
    public var busy: String?

    /// Why the scheduler skipped the tick (`nil` for a tick that ran): its record fails with code `skipped`.
    public var skipReason: TickReport.SkipReason?

    /// `.advertisement` for a passive sensor's record: its readings were heard, not read.
    public var source: Source = .connection
    /// When the device measured the readings, since the Unix epoch, when that is not when the record was made: a
    /// history entry's own time, on the gateway's clock.
    public var measured: Duration?
    /// For a device listened to (a passive sensor, or `pollWhen: .heard`): what was heard during the interval.
    public var heard: Heard?

    /// The device was not heard advertising (failure code `notHeard`): a passive sensor silent for its interval, or
    /// a gated poll that sent no Connect. It counts toward neither the device's backoff nor the adapter's health.
    public var isNotHeard: Bool {
        failure?.code == TransportError.Code.notHeard.rawValue
    }

    /// The poll found no free connection slot before its window ended (failure code `noSlot`): contention on the
    /// host's adapter, which says nothing about the device. It counts toward neither the device's backoff nor
    /// its availability nor the adapter's health.
    public var isContention: Bool {
        failure?.code == TransportError.Code.noSlot.rawValue
    }

    /// A record as the engine makes them; for sinks, tests and tools that handle records of their own.
    public init(
        device: String,
        peripheral: Peripheral,
        tick: UInt64,
        scheduled: KeepAliveInstant,
        fired: KeepAliveInstant,
        result: Result,
        values: [Value] = [],
        notifications: [Notification] = [],
        readings: [Reading] = [],
        failure: Failure? = nil,
        window: Window? = nil,
        attempts: Int = 0,
        interval: Duration,
        power: PowerState = .normal,
        trigger: Trigger = .schedule
    ) {
        self.device = device
        self.peripheral = peripheral
        self.tick = tick
        self.scheduled = scheduled
        self.fired = fired
        self.result = result
        self.values = values
        self.notifications = notifications
        self.readings = readings
        self.failure = failure
        self.window = window
        self.attempts = attempts
        self.interval = interval
        self.power = power
        self.trigger = trigger
    }
}
