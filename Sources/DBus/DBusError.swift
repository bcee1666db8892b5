/// The one error type of the `DBus` module.
///
/// A remote error keeps the D-Bus error `name` and `message` exactly as the peer sent them, so a caller can
/// tell BlueZ's `org.bluez.Error.Failed: le-connection-abort-by-local` from `org.bluez.Error.InProgress`.
/// Local failures carry a `code` and, where D-Bus has a name for them (a timed-out call is
/// `org.freedesktop.DBus.Error.NoReply`), that name too.
///
/// ```swift
/// do {
///     _ = try await connection.call(destination: "org.bluez", path: device, interface: "org.bluez.Device1",
///                                   method: "Connect")
/// } catch let error as DBusError where error.code == .remote && error.name == "org.bluez.Error.Failed" {
///     print("BlueZ said:", error.message)
/// } catch let error as DBusError where error.code == .disconnected {
///     // the bus went away: reconnect
/// }
/// ```
///
/// Method handlers of exported objects throw `DBusError(name:message:)` to answer with a D-Bus error.
public struct DBusError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, as an extensible set of codes (new codes are not a breaking change).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case remote, disconnected, timeout, typeMismatch, invalidArgument, unsupportedType, connectFailed
            case outOfMemory, systemCall
        }

        private var base: Base
        private init(_ base: Base) { self.base = base }

        /// The peer answered with a D-Bus error; `name` and `message` are the peer's.
        public static let remote = Code(.remote)
        /// The connection to the bus is gone (the daemon died, or `close()` was called).
        public static let disconnected = Code(.disconnected)
        /// No reply came within the call's timeout (`org.freedesktop.DBus.Error.NoReply`).
        public static let timeout = Code(.timeout)
        /// A value did not have the expected D-Bus signature; the message names both.
        public static let typeMismatch = Code(.typeMismatch)
        /// A name, path, signature or value is not valid D-Bus; nothing was sent.
        public static let invalidArgument = Code(.invalidArgument)
        /// A type the connection cannot carry: Unix file descriptors (`h`) over a transport that does not pass
        /// them (a `tcp:` address); nothing was sent.
        public static let unsupportedType = Code(.unsupportedType)
        /// Opening or registering the connection failed.
        public static let connectFailed = Code(.connectFailed)
        /// libdbus could not allocate memory.
        public static let outOfMemory = Code(.outOfMemory)
        /// A system call failed, e.g. duplicating a Unix file descriptor (`fcntl(F_DUPFD_CLOEXEC)`) when the process
        /// has none left (EMFILE); the message names the call and `errno`.
        public static let systemCall = Code(.systemCall)

        public var description: String {
            switch base {
            case .remote: "remote"
            case .disconnected: "disconnected"
            case .timeout: "timeout"
            case .typeMismatch: "typeMismatch"
            case .invalidArgument: "invalidArgument"
            case .unsupportedType: "unsupportedType"
            case .connectFailed: "connectFailed"
            case .outOfMemory: "outOfMemory"
            case .systemCall: "systemCall"
            }
        }
    }

    /// What kind of failure this is.
    public var code: Code
    /// The D-Bus error name (`org.bluez.Error.Failed`), when there is one.
    public var name: String?
    /// The human-readable text: the peer's error message, or a local explanation.
    public var message: String

    /// A D-Bus error reply with `name` and `message`, as a method handler throws it.
    public init(name: String, message: String = "") {
        self.init(code: .remote, name: name, message: message)
    }

    /// An error with any code.
    public init(code: Code, name: String? = nil, message: String) {
        self.code = code
        self.name = name
        self.message = message
    }

    public var description: String {
        if let name { return "DBusError.\(code)(\(name): \(message))" }
        return "DBusError.\(code)(\(message))"
    }
}

extension DBusError {
    /// Error names defined by the D-Bus specification, as used by this library and by BlueZ.
    public enum StandardName {
        public static let failed = "org.freedesktop.DBus.Error.Failed"
        public static let noReply = "org.freedesktop.DBus.Error.NoReply"
        public static let unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
        public static let unknownObject = "org.freedesktop.DBus.Error.UnknownObject"
        public static let unknownInterface = "org.freedesktop.DBus.Error.UnknownInterface"
        public static let unknownProperty = "org.freedesktop.DBus.Error.UnknownProperty"
        public static let propertyReadOnly = "org.freedesktop.DBus.Error.PropertyReadOnly"
        public static let invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
        public static let accessDenied = "org.freedesktop.DBus.Error.AccessDenied"
        public static let serviceUnknown = "org.freedesktop.DBus.Error.ServiceUnknown"
        public static let nameHasNoOwner = "org.freedesktop.DBus.Error.NameHasNoOwner"
        public static let noMemory = "org.freedesktop.DBus.Error.NoMemory"
    }

    static func invalidArgument(_ message: String) -> DBusError {
        DBusError(code: .invalidArgument, message: message)
    }

    static func typeMismatch(expected: String, found: String, context: String = "") -> DBusError {
        let prefix = context.isEmpty ? "" : "\(context): "
        return DBusError(
            code: .typeMismatch, message: "\(prefix)expected signature '\(expected)', found '\(found)'")
    }

    static let outOfMemory = DBusError(
        code: .outOfMemory, name: StandardName.noMemory, message: "libdbus is out of memory")

    static func disconnected(_ message: String = "the connection to the bus is closed") -> DBusError {
        DBusError(code: .disconnected, message: message)
    }
}
