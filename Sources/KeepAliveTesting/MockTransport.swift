public import KeepAlive
public import Polling
import Basics

/// A scriptable ``PeripheralTransport`` for tests and demos: per-device values or generators, latency on the
/// injected clock, failure scripts, a call log, and the most simultaneous connections it ever saw.
///
/// ```swift
/// let transport = MockTransport(clock: clock)
/// let sensor = Peripheral(address: "AA:BB:CC:DD:EE:01", adapter: "hci0")
/// transport.add(sensor, characteristics: [battery: .counter { UInt8($0 % 100) }])
/// transport.script(.connect, on: sensor, .fail(times: 2, with: TransportError(.connectionAborted,
/// "le-connection-abort-by-local")))
/// ```
public final class MockTransport: PeripheralTransport {
    public enum Operation: Hashable, Sendable, CustomStringConvertible {
        case connect
        case read(BluetoothUUID)
        case write(BluetoothUUID)
        case subscribe(BluetoothUUID)
        case disconnect

        public var description: String {
            switch self {
            case .connect: "connect"
            case .read(let uuid): "read(\(uuid.shortDescription))"
            case .write(let uuid): "write(\(uuid.shortDescription))"
            case .subscribe(let uuid): "subscribe(\(uuid.shortDescription))"
            case .disconnect: "disconnect"
            }
        }
    }

    /// What the next calls of an operation do.
    public enum Script: Sendable {
        /// Fail `times` calls with `error`, then succeed.
        case fail(times: Int, with: TransportError)
        /// Fail every call from now on.
        case alwaysFail(TransportError)
        /// Never answer: the call waits until it is cancelled (or, for connect, until its timeout).
        case hang
        /// Succeed again (clears the script).
        case succeed
    }

    /// A characteristic's behaviour.
    public struct Characteristic: Sendable {
        /// Value of the n-th read (n from 0); called outside the transport's lock, so it may ask the transport
        /// (``MockTransport/written(to:of:)``: a value selected by a write).
        public var read: @Sendable (Int) -> [UInt8]
        /// Period and value of the n-th notification, when it notifies.
        public var notify: (period: Duration, value: @Sendable (Int) -> [UInt8])?
        /// The value of its Characteristic Presentation Format descriptor (0x2904), when it has one.
        public var presentationFormat: [UInt8]?

        public init(
            read: @escaping @Sendable (Int) -> [UInt8],
            notify: (period: Duration, value: @Sendable (Int) -> [UInt8])? = nil,
            presentationFormat: [UInt8]? = nil
        ) {
            self.read = read
            self.notify = notify
            self.presentationFormat = presentationFormat
        }

        public static func fixed(_ bytes: [UInt8]) -> Characteristic {
            Characteristic(read: { _ in bytes })
        }

        /// Reads return a changing value; notifications (if `period` is given) count up.
        public static func counter(every period: Duration? = nil, _ value: @escaping @Sendable (Int) -> UInt8)
            -> Characteristic
        {
            Characteristic(read: { [value($0)] }, notify: period.map { ($0, { [value($0)] }) })
        }
    }

    public struct Latency: Sendable {
        public var connect: Duration
        public var read: Duration
        public var write: Duration
        public var disconnect: Duration

        public init(
            connect: Duration = .zero, read: Duration = .zero, write: Duration = .zero, disconnect: Duration = .zero
        ) {
            self.connect = connect
            self.read = read
            self.write = write
            self.disconnect = disconnect
        }
    }

    public struct Call: Hashable, Sendable, CustomStringConvertible {
        public var operation: Operation
        public var peripheral: Peripheral
        public var at: KeepAliveInstant

        public var description: String { "\(at) \(peripheral.address) \(operation)" }
    }

    struct Device {
        var name: String?
        var rssi: Int16
        var services: [BluetoothUUID]
        var characteristics: [BluetoothUUID: Characteristic]
        var reads: [BluetoothUUID: Int] = [:]
        var presentationReads: [BluetoothUUID: Int] = [:]
        var present = true
    }

    struct State {
        var devices: [Peripheral: Device] = [:]
        var scripts: [Peripheral: [Operation: ScriptState]] = [:]
        var connected: Set<Peripheral> = []
        var maxSimultaneous = 0
        var calls: [Call] = []
        var written: [Peripheral: [BluetoothUUID: [[UInt8]]]] = [:]
        /// Cancels everything in flight for a device when it vanishes.
        var inFlight: [Peripheral: [UInt64: @Sendable () -> Void]] = [:]
        var nextFlightID: UInt64 = 0
        /// The link of each device's last connect, for ``linkTime(of:)``.
        var links: [Peripheral: Link] = [:]
        var connects: UInt64 = 0
        /// The discovery streams running now, by id: ``advertise(_:)`` reaches each of them.
        var listeners: [UInt64: Listener] = [:]
        var nextListenerID: UInt64 = 0
    }

    /// One running ``discover(on:filter:)``.
    struct Listener {
        var adapter: String
        var filter: DiscoveryFilter
        var continuation: AsyncThrowingStream<Advertisement, any Error>.Continuation
    }

    /// A device's link since its last connect began, on the transport's clock.
    struct Link {
        /// Which connect this is (a disconnect that ends after the next connect began must not end its link).
        var connect: UInt64 = 0
        /// When the link came up, while it is up.
        var upSince: KeepAliveInstant?
        var total: Duration = .zero

        mutating func up(at now: KeepAliveInstant) {
            if upSince == nil { upSince = now }
        }

        mutating func down(at now: KeepAliveInstant) {
            guard let since = upSince else { return }
            total += since.duration(to: now)
            upSince = nil
        }
    }

    struct ScriptState {
        var failuresLeft: Int
        var error: TransportError?
        var always: Bool
        var hang: Bool
    }

    let time: TimeBase
    public let latency: Latency
    let state = Locked(State())

    public init(clock: any Clock<Duration> = ContinuousClock(), latency: Latency = Latency()) {
        self.time = TimeBase(clock)
        self.latency = latency
    }

    // MARK: Setting up

    /// Adds (or replaces) a peripheral that advertises and answers.
    public func add(
        _ peripheral: Peripheral,
        name: String? = nil,
        rssi: Int16 = -60,
        services: [BluetoothUUID] = [],
        characteristics: [BluetoothUUID: Characteristic]
    ) {
        state.withLock { state in
            state.devices[peripheral] = Device(
                name: name, rssi: rssi, services: services, characteristics: characteristics)
        }
    }

    /// Scripts what the next calls of `operation` on `peripheral` do.
    public func script(_ operation: Operation, on peripheral: Peripheral, _ script: Script) {
        state.withLock { state in
            let scriptState: ScriptState? =
                switch script {
                case .fail(let times, let error):
                    ScriptState(failuresLeft: times, error: error, always: false, hang: false)
                case .alwaysFail(let error): ScriptState(failuresLeft: 0, error: error, always: true, hang: false)
                case .hang: ScriptState(failuresLeft: 0, error: nil, always: false, hang: true)
                case .succeed: nil
                }
            state.scripts[peripheral, default: [:]][operation] = scriptState
        }
    }

    /// The device disappears: calls in flight fail at once with `deviceVanished`, later connects with
    /// `deviceNotFound`, its link (if any) is gone.
    public func vanish(_ peripheral: Peripheral) {
        let now = time.now
        let cancels: [@Sendable () -> Void] = state.withLock { state in
            state.devices[peripheral]?.present = false
            state.connected.remove(peripheral)
            state.links[peripheral]?.down(at: now)
            defer { state.inFlight[peripheral] = nil }
            return Array(state.inFlight[peripheral, default: [:]].values)
        }
        for cancel in cancels { cancel() }
    }

    /// The device is back.
    public func reappear(_ peripheral: Peripheral) {
        state.withLock { $0.devices[peripheral]?.present = true }
    }

    /// Delivers one advertisement to every discovery running on its adapter whose filter lets it through, as
    /// BlueZ's property changes would. Returns how many discoveries got it.
    @discardableResult
    public func advertise(_ advertisement: Advertisement) -> Int {
        let continuations = state.withLock { state in
            state.listeners.values.filter {
                $0.adapter == advertisement.peripheral.adapter && $0.filter.admits(advertisement)
            }.map(\.continuation)
        }
        for continuation in continuations { continuation.yield(advertisement) }
        return continuations.count
    }

    /// How many discoveries are running on `adapter`.
    public func listeners(on adapter: String) -> Int {
        state.withLock { $0.listeners.values.filter { $0.adapter == adapter }.count }
    }

    // MARK: Inspecting

    public var calls: [Call] {
        state.withLock { $0.calls }
    }

    public func calls(_ operation: Operation, on peripheral: Peripheral) -> [Call] {
        calls.filter { $0.operation == operation && $0.peripheral == peripheral }
    }

    /// Peripherals connected right now.
    public var connected: Set<Peripheral> {
        state.withLock { $0.connected }
    }

    /// How long the link of the last ``connect(_:options:)`` of `peripheral` was up, on this transport's clock:
    /// from the moment that connect succeeded (after its latency) until its disconnect returned (after its
    /// latency: the stack's own disconnect time, during which the link is still up) or the device vanished.
    /// `.zero` when that connect failed; `nil` while the link is up, or before any connect.
    public func linkTime(of peripheral: Peripheral) -> Duration? {
        state.withLock { state in
            state.links[peripheral].flatMap { $0.upSince == nil ? $0.total : nil }
        }
    }

    /// The most links that were ever up at once.
    public var maxSimultaneousConnections: Int {
        state.withLock { $0.maxSimultaneous }
    }

    /// Values written to a characteristic, in order.
    public func written(to characteristic: BluetoothUUID, of peripheral: Peripheral) -> [[UInt8]] {
        state.withLock { $0.written[peripheral]?[characteristic] ?? [] }
    }
}
