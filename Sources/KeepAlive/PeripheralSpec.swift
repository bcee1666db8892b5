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

        public init(characteristic: BluetoothUUID, duration: Duration) {
            self.characteristic = characteristic
            self.duration = duration
        }
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

    public init(
        name: String,
        peripheral: Peripheral,
        interval: Duration? = nil,
        budget: Duration? = nil,
        writes: [Write] = [],
        reads: [BluetoothUUID] = [],
        notifications: [Subscription] = []
    ) {
        self.name = name
        self.peripheral = peripheral
        self.interval = interval
        self.budget = budget
        self.writes = writes
        self.reads = reads
        self.notifications = notifications
    }

    /// Every characteristic the poll touches, for ``ConnectOptions/characteristics``.
    public var characteristics: [BluetoothUUID] {
        var seen = Set<BluetoothUUID>()
        return (writes.map(\.characteristic) + reads + notifications.map(\.characteristic)).filter { seen.insert($0).inserted }
    }
}
