import KeepAlive
/// Every failure a ``PeripheralTransport`` reports: a code that says what happened and whether retrying can help,
/// the human message, and — when it came from BlueZ — the D-Bus error name, kept verbatim.
///
/// ```swift
/// do { try await transport.connect(to: sensor, options: options) }
/// catch let error as TransportError where error.isTransient { … retry … }
/// ```
public struct TransportError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What happened. Extensible: transports may define more codes with their retry class.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        /// Whether retrying the same operation (after a delay, usually after reconnecting) can succeed.
        public let retry: RetryClass

        public init(_ rawValue: String, retry: RetryClass) {
            self.rawValue = rawValue
            self.retry = retry
        }

        public var description: String { rawValue }

        public static func == (lhs: Code, rhs: Code) -> Bool { lhs.rawValue == rhs.rawValue }
        public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

        // Transient: the link or the stack, not the request, was at fault.
        /// `Failed: le-connection-abort-by-local` (Connect gave up: the device did not answer).
        public static let connectionAborted = Code("connectionAborted", retry: .transient)
        /// `Failed: br-connection-canceled` (our own Disconnect cancelled a pending Connect).
        public static let connectionCanceled = Code("connectionCanceled", retry: .transient)
        /// `InProgress`, or `Failed: Operation already in progress`.
        public static let inProgress = Code("inProgress", retry: .transient)
        /// `NotReady` ("Resource Not Ready").
        public static let notReady = Code("notReady", retry: .transient)
        /// `Failed: Not connected` (link lost; GATT objects may still be cached).
        public static let notConnected = Code("notConnected", retry: .transient)
        /// An operation's deadline passed (ours, D-Bus `NoReply`, or the ATT 30 s timeout).
        public static let timeout = Code("timeout", retry: .transient)
        /// bluetoothd left the bus (restart or crash): every handle is stale.
        public static let serviceRestarted = Code("serviceRestarted", retry: .transient)
        /// The device object disappeared (InterfacesRemoved) while we used it.
        public static let deviceVanished = Code("deviceVanished", retry: .transient)
        /// The device is not known to the adapter yet (no object, not advertising).
        public static let deviceNotFound = Code("deviceNotFound", retry: .transient)
        /// `Failed: Input/output error`, `Software caused connection abort` and other link-level I/O failures.
        public static let ioError = Code("ioError", retry: .transient)
        /// `org.bluez` is not on the bus (`ServiceUnknown`), or the bus itself is gone.
        public static let serviceUnavailable = Code("serviceUnavailable", retry: .transient)
        /// The adapter is powered off or rfkill-blocked; the message says which.
        public static let adapterUnavailable = Code("adapterUnavailable", retry: .transient)
        /// A notification stream went silent for longer than its bound while the link was up (a zombie link):
        /// the poll drops the link and does not retry it in the same window; the next poll makes a new one.
        public static let silentLink = Code("silentLink", retry: .transient)
        /// An unrecognised `org.bluez.Error.Failed`: assumed transient, never retried in a tight loop.
        public static let failed = Code("failed", retry: .transient)
        /// The window ended before a connection slot on the adapter was free: the other devices held all of them.
        /// Contention on the host's side, not the device's failure: ``PollEngine`` counts it toward neither the
        /// device's backoff nor its availability nor the adapter's health (``PollRecord/isContention``).
        public static let noSlot = Code("noSlot", retry: .transient)
        /// The device was not heard advertising during its interval: a passive sensor with nothing to report, or
        /// a poll gated on hearing it (`poll_when: heard`) that sent no Connect. Counts toward neither the
        /// device's backoff nor the adapter's health (``PollRecord/isNotHeard``).
        public static let notHeard = Code("notHeard", retry: .transient)

        // Permanent: the same request will fail the same way.
        /// `NotSupported`.
        public static let notSupported = Code("notSupported", retry: .permanent)
        /// `NotPermitted` (e.g. "Read not permitted") or `NotAuthorized`.
        public static let notPermitted = Code("notPermitted", retry: .permanent)
        /// `DoesNotExist`.
        public static let doesNotExist = Code("doesNotExist", retry: .permanent)
        /// The device has no characteristic with the wanted UUID.
        public static let characteristicNotFound = Code("characteristicNotFound", retry: .permanent)
        /// `InvalidArguments`, `InvalidValueLength`, `InvalidOffset`.
        public static let invalidArguments = Code("invalidArguments", retry: .permanent)
        /// The named adapter does not exist.
        public static let adapterNotFound = Code("adapterNotFound", retry: .permanent)
        /// An ATT error from the peer ("Operation failed with ATT error: 0x0e"); `attError` holds the code.
        public static let attError = Code("attError", retry: .permanent)
        /// The other side answered with the wrong types or signature (`UnknownMethod`, a bad reply).
        public static let protocolError = Code("protocolError", retry: .permanent)
        /// Not allowed to talk to the service (D-Bus `AccessDenied`).
        public static let accessDenied = Code("accessDenied", retry: .permanent)
        /// The device's advertisements were heard and refused: a wrong key, a replayed counter, a plain packet
        /// from a device with a key, bytes its format cannot hold. The message is the decoder's, with the code
        /// (`authenticationFailed`, `replayed`…) first.
        public static let badAdvertisement = Code("badAdvertisement", retry: .permanent)
    }

    public enum RetryClass: String, Hashable, Sendable {
        case transient
        case permanent
    }

    public var code: Code
    public var message: String
    /// The D-Bus error name when the failure came over D-Bus (e.g. `org.bluez.Error.Failed`).
    public var dbusName: String?
    /// The ATT error code for ``Code/attError``.
    public var attError: UInt8?

    public init(_ code: Code, _ message: String, dbusName: String? = nil, attError: UInt8? = nil) {
        self.code = code
        self.message = message
        self.dbusName = dbusName
        self.attError = attError
    }

    public var isTransient: Bool { code.retry == .transient }

    public var description: String {
        var text = "\(code): \(message)"
        if let dbusName { text += " [\(dbusName)]" }
        return text
    }
}
