public import DBus
import KeepAlive
public import Polling

/// Maps what BlueZ (and the bus in front of it) answer into the core's `TransportError` taxonomy, keeping the
/// D-Bus error name and message.
///
/// The mapping follows what bluetoothd 5.66 actually sends (see docs/BLUEZ.md): the name decides
/// first (`InProgress`, `NotReady`, `NotPermitted`…); for the catch-all `org.bluez.Error.Failed` the message
/// decides (`le-connection-abort-by-local`, `br-connection-canceled`, `Not connected`, ATT errors…).
///
/// ```swift
/// do { try await connection.call(…) }
/// catch let error as DBusError { throw BlueZErrors.transportError(error, context: "Connect \(address)") }
/// ```
public enum BlueZErrors {
    /// The D-Bus error names BlueZ uses (`org.bluez.Error.*`) and the bus's own that matter to a client.
    public enum Name {
        public static let failed = "org.bluez.Error.Failed"
        public static let inProgress = "org.bluez.Error.InProgress"
        public static let notReady = "org.bluez.Error.NotReady"
        public static let notSupported = "org.bluez.Error.NotSupported"
        public static let notPermitted = "org.bluez.Error.NotPermitted"
        public static let notAuthorized = "org.bluez.Error.NotAuthorized"
        public static let doesNotExist = "org.bluez.Error.DoesNotExist"
        public static let invalidArguments = "org.bluez.Error.InvalidArguments"
        public static let invalidValueLength = "org.bluez.Error.InvalidValueLength"
        public static let invalidOffset = "org.bluez.Error.InvalidOffset"
        public static let notConnected = "org.bluez.Error.NotConnected"
        public static let alreadyConnected = "org.bluez.Error.AlreadyConnected"
        public static let connectionAttemptFailed = "org.bluez.Error.ConnectionAttemptFailed"
        public static let unknownObject = "org.freedesktop.DBus.Error.UnknownObject"
        public static let unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
        public static let serviceUnknown = "org.freedesktop.DBus.Error.ServiceUnknown"
        public static let nameHasNoOwner = "org.freedesktop.DBus.Error.NameHasNoOwner"
        public static let noReply = "org.freedesktop.DBus.Error.NoReply"
        public static let accessDenied = "org.freedesktop.DBus.Error.AccessDenied"
        public static let invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
    }

    /// The core error for a D-Bus failure; `context` says what was being done (it leads the message).
    public static func transportError(_ error: DBusError, context: String) -> TransportError {
        let message = error.message.isEmpty ? context : "\(context): \(error.message)"
        func make(_ code: TransportError.Code, attError: UInt8? = nil) -> TransportError {
            TransportError(code, message, dbusName: error.name, attError: attError)
        }
        switch error.code {
        case .disconnected:
            return make(.serviceUnavailable)
        case .timeout:
            return make(.timeout)
        case .typeMismatch, .unsupportedType:
            return make(.protocolError)
        case .invalidArgument:
            return make(.invalidArguments)
        case .connectFailed:
            return make(.serviceUnavailable)
        default:
            break
        }
        switch error.name {
        case Name.inProgress?: return make(.inProgress)
        case Name.notReady?: return make(.notReady)
        case Name.notSupported?: return make(.notSupported)
        case Name.notPermitted?, Name.notAuthorized?: return make(.notPermitted)
        case Name.doesNotExist?: return make(.doesNotExist)
        case Name.invalidArguments?, Name.invalidValueLength?, Name.invalidOffset?, Name.invalidArgs?:
            return make(.invalidArguments)
        case Name.notConnected?: return make(.notConnected)
        case Name.alreadyConnected?: return make(.inProgress)
        case Name.connectionAttemptFailed?: return make(.connectionAborted)
        case Name.unknownObject?: return make(.deviceVanished)
        case Name.unknownMethod?: return make(.protocolError)
        case Name.serviceUnknown?, Name.nameHasNoOwner?: return make(.serviceUnavailable)
        case Name.noReply?:
            // The bus itself answers NoReply when the callee leaves it mid-call: bluetoothd crashed or
            // restarted, which the caller hears before NameOwnerChanged.
            return error.message.lowercased().contains("disconnected from message bus")
                ? make(.serviceRestarted) : make(.timeout)
        case Name.accessDenied?: return make(.accessDenied)
        case Name.failed?: return failed(error.message, make: make)
        default: return make(.failed)
        }
    }

    /// `org.bluez.Error.Failed` is BlueZ's catch-all: its text says what happened.
    private static func failed(
        _ text: String,
        make: (TransportError.Code, UInt8?) -> TransportError
    ) -> TransportError {
        let lowered = text.lowercased()
        if let att = attErrorCode(in: lowered) { return make(.attError, att) }
        let table: [(String, TransportError.Code)] = [
            ("le-connection-abort-by-local", .connectionAborted),
            ("br-connection-canceled", .connectionCanceled),
            ("operation already in progress", .inProgress),
            ("in progress", .inProgress),
            ("not connected", .notConnected),
            ("input/output error", .ioError),
            ("software caused connection abort", .ioError),
            ("connection refused", .connectionAborted),
            ("connection timed out", .timeout),
            ("timeout", .timeout),
            ("no discovery started", .notReady),
            ("no notify session started", .notReady),
            ("not powered", .adapterUnavailable),
            ("resource not ready", .notReady),
        ]
        for (fragment, code) in table where lowered.contains(fragment) {
            return make(code, nil)
        }
        return make(.failed, nil)
    }

    /// "Operation failed with ATT error: 0x0e" → 0x0e.
    static func attErrorCode(in text: String) -> UInt8? {
        guard let range = text.firstRange(of: "att error: 0x") else { return nil }
        let digits = text[range.upperBound...].prefix { $0.isHexDigit }
        return UInt8(digits.prefix(2), radix: 16)
    }
}
