/// A valid D-Bus object path such as `/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF`.
///
/// Paths are checked when made (with libdbus's own `dbus_validate_path`), so an invalid path is a thrown
/// error here instead of an aborted process inside libdbus.
///
/// ```swift
/// let adapter: ObjectPath = "/org/bluez/hci0"          // a literal: checked, traps if invalid
/// let device = try adapter.appending("dev_AA_BB_CC_DD_EE_FF")
/// let parsed = try ObjectPath(userSuppliedString)      // throws DBusError.Code.invalidArgument
/// ```
public struct ObjectPath: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    /// The path as a string.
    public let rawValue: String

    /// The root path `/`.
    public static let root = ObjectPath(unchecked: "/")

    /// Checks `rawValue`; nil when it is not a valid object path.
    public init?(rawValue: String) {
        guard Names.isValidPath(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    /// Checks `string`; throws `DBusError.Code.invalidArgument` when it is not a valid object path.
    public init(_ string: String) throws {
        guard let path = ObjectPath(rawValue: string) else {
            throw DBusError.invalidArgument("'\(string)' is not a valid D-Bus object path")
        }
        self = path
    }

    /// A path written in the source; an invalid literal is a programmer error and traps.
    public init(stringLiteral value: String) {
        precondition(Names.isValidPath(value), "'\(value)' is not a valid D-Bus object path")
        self.rawValue = value
    }

    /// A path that libdbus already validated (it came off the wire), or a valid path cut at a `/` (its device's
    /// path, from BlueZ's object cache on every signal).
    package init(unchecked rawValue: String) {
        self.rawValue = rawValue
    }

    public var description: String { rawValue }

    public static func < (lhs: ObjectPath, rhs: ObjectPath) -> Bool { lhs.rawValue < rhs.rawValue }

    /// This path with one more element; throws if `element` is not `[A-Za-z0-9_]+`.
    public func appending(_ element: String) throws -> ObjectPath {
        try ObjectPath(rawValue == "/" ? "/" + element : rawValue + "/" + element)
    }

    /// The parent path, or nil for `/`.
    public var parent: ObjectPath? {
        guard rawValue != "/" else { return nil }
        let index = rawValue.lastIndex(of: "/")!  // valid paths always contain "/"
        return index == rawValue.startIndex ? .root : ObjectPath(unchecked: String(rawValue[..<index]))
    }

    /// True when this path lies strictly below `ancestor` (`/a/b` is below `/a` and `/`, not below `/a/b`).
    public func isDescendant(of ancestor: ObjectPath) -> Bool {
        if ancestor.rawValue == "/" { return rawValue != "/" }
        return rawValue.count > ancestor.rawValue.count && rawValue.hasPrefix(ancestor.rawValue + "/")
    }

    /// True when this path is `namespace` or lies below it (the `path_namespace` match rule).
    public func isInNamespace(_ namespace: ObjectPath) -> Bool {
        self == namespace || isDescendant(of: namespace)
    }
}
