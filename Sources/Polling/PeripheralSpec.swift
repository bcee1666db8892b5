import KeepAlive
public import Readings

/// One device the poll engine polls: what to connect to and what to do while connected.
///
/// ```swift
/// let spec = PeripheralSpec(
///     name: "greenhouse-3",
///     peripheral: Peripheral(address: "C4:7C:8D:6A:1B:22", adapter: "hci0"),
///     reads: [try BluetoothUUID("2a19")],
///     notifications: [.init(characteristic: try BluetoothUUID("2a6e"), duration: .seconds(5))]
/// )
/// ```
public struct PeripheralSpec: Hashable, Sendable {
    /// How one characteristic's bytes become `Reading`s, when the SIG table is not the answer.
    public struct Decoding: Hashable, Sendable {
        /// The fields of a vendor payload (Mi Flora's 16 bytes: temperature at 0, light at 3…). Wins over the SIG
        /// table and the 0x2904 descriptor: the operator knows the device.
        public var layout: Layout?
        /// The reading's name when the value is decoded by its 0x2904 descriptor or shown as hex (default: the
        /// characteristic's UUID).
        public var name: String?

        public init(layout: Layout? = nil, name: String? = nil) {
            self.layout = layout
            self.name = name
        }
    }

    public struct Write: Hashable, Sendable {
        public var characteristic: BluetoothUUID
        public var value: [UInt8]
        public var type: WriteType

        public init(characteristic: BluetoothUUID, value: [UInt8], type: WriteType = .request) {
            self.characteristic = characteristic
            self.value = value
            self.type = type
        }
    }

    public struct Subscription: Hashable, Sendable {
        public var characteristic: BluetoothUUID
        /// How long to listen each tick.
        public var duration: Duration
        /// The longest silence this stream is allowed while the link is up (`nil`: no bound). A longer one is a
        /// zombie link: the window fails with ``TransportError/Code/silentLink`` and the link is dropped, to be
        /// made afresh by the next poll.
        public var silence: Duration?

        public init(characteristic: BluetoothUUID, duration: Duration, silence: Duration? = nil) {
            self.characteristic = characteristic
            self.duration = duration
            self.silence = silence
        }
    }

    /// What the device's advertisements are and how to open them: for a passive sensor (nothing to read, write
    /// or listen to) its only input, for a polled one what `pollWhen` listens for.
    public struct Advertising: Hashable, Sendable {
        /// The format its data is in; `nil`: whichever of the known formats it sends (`auto`).
        public var format: AdvertisementFormat?
        /// The device's key (BTHome's encryption key, Xiaomi's bind key): then only encrypted advertisements
        /// that authenticate with it are accepted.
        public var key: AdvertisementKey?

        public init(format: AdvertisementFormat? = nil, key: AdvertisementKey? = nil) {
            self.format = format
            self.key = key
        }
    }

    /// When a scheduled tick connects.
    public enum PollWhen: String, Hashable, Sendable {
        /// At every tick.
        case always
        /// Only when the device was heard advertising since its last tick (or during its window): a sensor that
        /// is away costs no Connect, and the tick is recorded as `notHeard`.
        case heard
    }

    /// Unique among the engine's devices: names the device in records, logs and the ledger.
    public var name: String
    public var peripheral: Peripheral
    /// Overrides the scheduler's interval for this device.
    public var interval: Duration?
    /// Overrides the window budget for this device.
    public var budget: Duration?
    /// Writes happen first, in order, then reads, then subscriptions.
    public var writes: [Write]
    public var reads: [BluetoothUUID]
    public var notifications: [Subscription]
    /// Per characteristic, how its values become readings; a characteristic not listed is decoded by the SIG
    /// table, else its 0x2904 descriptor, else shown as hex (`ReadingsDecoder`).
    public var decoding: [BluetoothUUID: Decoding]
    /// The device's advertisements, when they are listened to (see ``isPassive`` and ``pollWhen``).
    public var advertising: Advertising?
    /// `.heard`: connect only when the device was heard advertising. Default `.always`.
    public var pollWhen: PollWhen

    public init(
        name: String,
        peripheral: Peripheral,
        interval: Duration? = nil,
        budget: Duration? = nil,
        writes: [Write] = [],
        reads: [BluetoothUUID] = [],
        notifications: [Subscription] = [],
        decoding: [BluetoothUUID: Decoding] = [:],
        advertising: Advertising? = nil,
        pollWhen: PollWhen = .always
    ) {
        self.name = name
        self.peripheral = peripheral
        self.interval = interval
        self.budget = budget
        self.writes = writes
        self.reads = reads
        self.notifications = notifications
        self.decoding = decoding
        self.advertising = advertising
        self.pollWhen = pollWhen
    }

    /// A sensor that is only listened to: advertisements and nothing to read, write or listen to. Never connected
    /// to; each tick records what was heard since the last.
    public var isPassive: Bool {
        advertising != nil && writes.isEmpty && reads.isEmpty && notifications.isEmpty
    }

    /// Whether the device's advertisements are listened to: a passive sensor, or a poll gated on hearing it.
    public var listensToAdvertisements: Bool {
        isPassive || pollWhen == .heard
    }

    /// Every characteristic the poll touches, for ``ConnectOptions/characteristics``.
    public var characteristics: [BluetoothUUID] {
        var seen = Set<BluetoothUUID>()
        return (writes.map(\.characteristic) + reads + notifications.map(\.characteristic)).filter {
            seen.insert($0).inserted
        }
    }
}
