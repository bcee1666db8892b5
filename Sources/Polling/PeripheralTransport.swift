import KeepAlive
/// A peripheral as the transport addresses it: its Bluetooth address on a named adapter.
///
/// The adapter is always named: with two adapters "the default one" is a coin toss.
public struct Peripheral: Hashable, Sendable, CustomStringConvertible {
    /// `AA:BB:CC:DD:EE:FF`, upper case.
    public var address: String
    /// `hci0`, `hci1`, …
    public var adapter: String

    public init(address: String, adapter: String) {
        self.address = address.uppercased()
        self.adapter = adapter
    }

    public var description: String { "\(address)@\(adapter)" }
}

/// How to connect.
public struct ConnectOptions: Hashable, Sendable {
    /// Connect gives up (and tears down anything half-open) after this long.
    public var timeout: Duration
    /// Characteristics the caller will use: connect returns once they are resolved (on BlueZ they can appear
    /// after `ServicesResolved`), or fails with ``TransportError/Code/characteristicNotFound``.
    public var characteristics: [BluetoothUUID]

    public init(timeout: Duration = .seconds(10), characteristics: [BluetoothUUID] = []) {
        self.timeout = timeout
        self.characteristics = characteristics
    }
}

/// GATT write with response (`request`) or without (`command`).
public enum WriteType: String, Hashable, Sendable {
    case request
    case command
}

/// What discovery narrows to.
public struct DiscoveryFilter: Hashable, Sendable {
    public var serviceUUIDs: [BluetoothUUID]
    /// Only devices at least this strong.
    public var rssi: Int16?
    /// Report every advertisement, not only those whose data changed (BlueZ's `DuplicateData`): what listening
    /// to sensors needs, whose repeated advertisements are their heartbeat.
    public var duplicateData: Bool
    /// Only these addresses (upper case, `AA:BB:CC:DD:EE:FF`); empty: every device. Checked before anything of
    /// a device is read, so a busy neighbourhood costs a lookup per advertisement and nothing else.
    public var addresses: Set<String>
    /// Only what is heard from now on: neither the devices the stack already holds (one in its cache may be long
    /// gone) nor changes that are no advertisement (a link's `Connected`). For listeners that count what they
    /// hear; off by default (a scan reports every device it knows of).
    public var heardOnly: Bool

    public init(
        serviceUUIDs: [BluetoothUUID] = [], rssi: Int16? = nil, duplicateData: Bool = false,
        addresses: Set<String> = [], heardOnly: Bool = false
    ) {
        self.serviceUUIDs = serviceUUIDs
        self.rssi = rssi
        self.duplicateData = duplicateData
        self.addresses = addresses
        self.heardOnly = heardOnly
    }
}

/// One sighting of a peripheral during discovery (or a device the stack already knows).
public struct Advertisement: Hashable, Sendable {
    public var peripheral: Peripheral
    public var name: String?
    public var rssi: Int16?
    public var serviceUUIDs: [BluetoothUUID]
    /// Company identifier → payload.
    public var manufacturerData: [UInt16: [UInt8]]
    /// Service UUID → payload (the bytes after the UUID): BTHome, pvvx, MiBeacon live here.
    public var serviceData: [BluetoothUUID: [UInt8]]

    public init(
        peripheral: Peripheral,
        name: String? = nil,
        rssi: Int16? = nil,
        serviceUUIDs: [BluetoothUUID] = [],
        manufacturerData: [UInt16: [UInt8]] = [:],
        serviceData: [BluetoothUUID: [UInt8]] = [:]
    ) {
        self.peripheral = peripheral
        self.name = name
        self.rssi = rssi
        self.serviceUUIDs = serviceUUIDs
        self.manufacturerData = manufacturerData
        self.serviceData = serviceData
    }
}

/// The poll engine's only way to a Bluetooth stack: BlueZ over D-Bus in production, `MockTransport` (from
/// KeepAliveTesting) in tests.
///
/// The contract every implementation must meet:
/// - **Typed failures.** Every error thrown is a ``TransportError`` whose code says transient or permanent,
///   except `CancellationError` when the calling task was cancelled.
/// - **Bounded.** No call waits forever: `connect` honours `options.timeout`; `read`, `write` and
///   `notifications` fail with ``TransportError/Code/timeout`` rather than hang past the stack's own limits,
///   and end at once (``TransportError/Code/serviceRestarted``, ``TransportError/Code/deviceVanished``) when
///   the stack or the device goes away.
/// - **Cancellable.** Cancelling the calling task ends the call promptly; a cancelled `connect` leaves no link
///   up: it starts tearing down the pending connection itself and returns without waiting for that.
/// - **Never leaks a link.** A `connect` that throws leaves the peripheral disconnected, or (when cancelled)
///   being disconnected. `disconnect` always tries, returns within `timeout` whatever happens, works in a
///   cancelled task, is idempotent, and joins a teardown already in flight rather than starting another.
/// - **Notifications** arrive on a stream that ends when the link drops or the consumer stops iterating
///   (which also unsubscribes).
/// - **Sendable and re-entrant**: many peripherals are polled at once, each call independent.
public protocol PeripheralTransport: Sendable {
    /// Streams advertisements on `adapter` until the consumer stops; devices the stack already holds count as
    /// found, unless `filter.heardOnly`.
    func discover(on adapter: String, filter: DiscoveryFilter) -> AsyncThrowingStream<Advertisement, any Error>

    /// Connects and resolves the wanted characteristics.
    func connect(_ peripheral: Peripheral, options: ConnectOptions) async throws

    func read(_ characteristic: BluetoothUUID, from peripheral: Peripheral) async throws -> [UInt8]

    func write(_ value: [UInt8], to characteristic: BluetoothUUID, of peripheral: Peripheral, type: WriteType)
        async throws

    /// Subscribes; each element is one notified value.
    func notifications(
        from characteristic: BluetoothUUID,
        of peripheral: Peripheral
    ) async throws -> AsyncThrowingStream<[UInt8], any Error>

    /// Disconnects within `timeout`, whatever state the link is in.
    func disconnect(_ peripheral: Peripheral, timeout: Duration) async

    /// The value of `characteristic`'s Characteristic Presentation Format descriptor (0x2904), or `nil` when it
    /// has none; while connected. The default says none. ``PollEngine`` asks once per device and characteristic
    /// whose readings the descriptor decides (no configured layout, not in the SIG table) and keeps the answer:
    /// the descriptor describes the characteristic, not a value, so it does not change between connections.
    func presentationFormat(of characteristic: BluetoothUUID, from peripheral: Peripheral) async throws -> [UInt8]?

    /// How long the link made by the last ``connect(_:options:)`` of `peripheral` was up, once
    /// ``disconnect(_:timeout:)`` returned: from the stack's own signals (BlueZ's `Connected` true → false), not
    /// from when the calls were made, so it is the airtime the sensor paid for. `.zero` when that connect brought
    /// no link up; `nil` when the transport cannot say (the default) or the link is not down yet. ``PollEngine``
    /// asks after every attempt's disconnect and records the sum as ``PollRecord/link``.
    func linkTime(of peripheral: Peripheral) -> Duration?

    /// Of the last successful ``connect(_:options:)`` of `peripheral`, the part spent resolving services once the
    /// link was up (BlueZ: from the `Connect` reply to `ServicesResolved` and the wanted characteristics); `nil`
    /// when the transport cannot say (the default). ``PollEngine``'s metrics split a connect's time with it.
    func serviceResolutionTime(of peripheral: Peripheral) -> Duration?

    /// Where this transport's work runs cheapest, or nil (the default): for BlueZ, the D-Bus connection's
    /// thread. ``PollEngine`` runs each poll with it as the task executor preference, so a poll's D-Bus calls,
    /// replies and signals resume it on the thread that read them instead of hopping through the cooperative
    /// pool. Work run there must not block.
    var preferredExecutor: (any TaskExecutor)? { get }
}

extension PeripheralTransport {
    public var preferredExecutor: (any TaskExecutor)? { nil }

    public func linkTime(of peripheral: Peripheral) -> Duration? { nil }

    public func serviceResolutionTime(of peripheral: Peripheral) -> Duration? { nil }

    public func presentationFormat(of characteristic: BluetoothUUID, from peripheral: Peripheral) async throws
        -> [UInt8]?
    {
        nil
    }
}
