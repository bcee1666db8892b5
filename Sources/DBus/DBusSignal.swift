/// A signal received from the bus.
///
/// ```swift
/// for try await signal in try await bus.signals(matching: MatchRule(member: "PropertiesChanged")) {
///     let (interface, changed, _) = try signal.arguments.decode(String.self, [String: DBusValue].self,
///                                                               [String].self)
///     print(signal.sender ?? "?", signal.path, interface, changed)
/// }
/// ```
public struct DBusSignal: Sendable, Hashable {
    /// The emitter's unique name (`:1.7`), or `org.freedesktop.DBus` for the bus itself.
    public var sender: String?
    /// The destination when the signal was unicast to us, nil when broadcast.
    public var destination: String?
    public var path: ObjectPath
    public var interface: String
    public var member: String
    public var arguments: [DBusValue]

    public init(
        sender: String?, destination: String? = nil, path: ObjectPath, interface: String, member: String,
        arguments: [DBusValue]
    ) {
        self.sender = sender
        self.destination = destination
        self.path = path
        self.interface = interface
        self.member = member
        self.arguments = arguments
    }
}

/// One change of a bus name's owner, from `org.freedesktop.DBus.NameOwnerChanged`.
///
/// ```swift
/// for try await change in try await bus.nameOwnerChanges(for: "org.bluez") where change.newOwner == nil {
///     print("bluetoothd left the bus")
/// }
/// ```
public struct NameOwnerChange: Sendable, Hashable {
    public var name: String
    /// The previous owner's unique name; nil when the name had no owner.
    public var oldOwner: String?
    /// The new owner's unique name; nil when the name is now without owner.
    public var newOwner: String?

    public init(name: String, oldOwner: String?, newOwner: String?) {
        self.name = name
        self.oldOwner = oldOwner
        self.newOwner = newOwner
    }
}
