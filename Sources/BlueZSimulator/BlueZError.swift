public import DBus

/// The error replies bluetoothd 5.66 sends, names and texts exactly as a client sees them
/// (BlueZ's src/error.c and the texts measured in docs/BLUEZ.md).
///
/// ```swift
/// throw BlueZError.failed("le-connection-abort-by-local")
/// ```
public enum BlueZError {
    public static let prefix = "org.bluez.Error."

    public static func failed(_ text: String) -> DBusError { DBusError(name: prefix + "Failed", message: text) }
    public static let inProgress = DBusError(name: prefix + "InProgress", message: "In Progress")
    public static let notReady = DBusError(name: prefix + "NotReady", message: "Resource Not Ready")
    public static let invalidArguments = DBusError(
        name: prefix + "InvalidArguments", message: "Invalid arguments in method call")
    public static let doesNotExist = DBusError(name: prefix + "DoesNotExist", message: "Does Not Exist")
    public static let notSupported = DBusError(name: prefix + "NotSupported", message: "Operation is not supported")
    public static let readNotPermitted = DBusError(name: prefix + "NotPermitted", message: "Read not permitted")
    public static let writeNotPermitted = DBusError(name: prefix + "NotPermitted", message: "Write not permitted")
    public static let blocked = DBusError(name: prefix + "Blocked", message: "Blocked through rfkill")
    public static let alreadyExists = DBusError(name: prefix + "AlreadyExists", message: "Already Exists")

    // Texts of org.bluez.Error.Failed.
    public static let connectionAbortByLocal = failed("le-connection-abort-by-local")
    public static let connectionCanceled = failed("br-connection-canceled")
    public static let connectAlreadyInProgress = failed("Operation already in progress")
    public static let notConnected = failed("Not connected")
    public static let noDiscoveryStarted = failed("No discovery started")
    public static let noNotifySession = failed("No notify session started")
    public static let inputOutput = failed("Input/output error")
    public static let connectionAbort = failed("Software caused connection abort")

    /// `Failed: Operation failed with ATT error: 0x0e`.
    public static func attError(_ code: UInt8) -> DBusError {
        let hex = String(code, radix: 16)
        return failed("Operation failed with ATT error: 0x" + (hex.count < 2 ? "0" + hex : hex))
    }

    /// The object went away under a pending call (device removed, vanished).
    public static func unknownObject(_ path: ObjectPath) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.UnknownObject", message: "No such object path '\(path)'")
    }
}
