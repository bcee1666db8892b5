import CDBus

/// A signal as it arrived, its arguments not read yet: what a handler added with
/// ``DBusConnection/addSignalHandler(matching:reading:onEnd:)`` gets, to read only what it needs.
///
/// The standard signals an object cache lives on have typed readers that walk the message once, without building
/// the generic ``DBusValue`` tree and then dictionaries from it: a BlueZ poll brings six or seven such signals,
/// and reading each generically was a large share of a poll (Benchmarks/NOTES.md).
///
/// ```swift
/// let token = try await bus.addSignalHandler(matching: MatchRule(sender: "org.bluez"), reading: { signal in
///     guard signal.member == "PropertiesChanged", let change = try? signal.propertiesChanged() else { return }
///     print(signal.path, change.interface, change.changed.map(\.name))
/// }, onEnd: { _ in })
/// ```
public struct ReceivedSignal: Sendable {
    /// The emitter's unique name (`:1.7`), or `org.freedesktop.DBus` for the bus itself.
    public let sender: String?
    public let path: ObjectPath
    public let interface: String
    public let member: String
    let message: DBusMessage

    /// The arguments' signature (`sa{sv}as` for a `PropertiesChanged`).
    public var signature: DBusSignature { DBusSignature(unchecked: libdbus_message_get_signature(message.pointer)) }

    /// Every argument, read generically.
    public func arguments() throws -> [DBusValue] {
        try message.arguments()
    }

    /// The whole signal, its arguments read generically (what ``DBusConnection/signals(matching:)`` delivers).
    public func decoded() throws -> DBusSignal {
        DBusSignal(
            sender: sender, destination: message.destination, path: path, interface: interface, member: member,
            arguments: try arguments())
    }

    /// The arguments of an `org.freedesktop.DBus.Properties.PropertiesChanged` (`sa{sv}as`; a signal without the
    /// invalidated list, or with something else there, reads as invalidating nothing). Throws
    /// `DBusError.Code.typeMismatch` for any other signature.
    public func propertiesChanged() throws -> PropertiesChange {
        try message.readPropertiesChanged()
    }

    /// The arguments of an `org.freedesktop.DBus.ObjectManager.InterfacesAdded` (`oa{sa{sv}}`): the object and
    /// each interface with its properties, their `v` wrappers taken off. Throws `DBusError.Code.typeMismatch`
    /// for any other signature.
    public func interfacesAdded() throws -> (
        path: ObjectPath, interfaces: [(name: String, properties: [String: DBusValue])]
    ) {
        try message.readInterfacesAdded()
    }

    /// The arguments of an `org.freedesktop.DBus.ObjectManager.InterfacesRemoved` (`oas`). Throws
    /// `DBusError.Code.typeMismatch` for any other signature.
    public func interfacesRemoved() throws -> (path: ObjectPath, interfaces: [String]) {
        try message.readInterfacesRemoved()
    }
}

/// What one `PropertiesChanged` says: the interface, the changed properties in the order they came (their `v`
/// wrappers taken off) and the names of the invalidated ones.
public struct PropertiesChange: Sendable, Equatable {
    public var interface: String
    public var changed: [Property]
    public var invalidated: [String]

    public struct Property: Sendable, Equatable {
        public var name: String
        public var value: DBusValue

        public init(name: String, value: DBusValue) {
            self.name = name
            self.value = value
        }
    }

    public init(interface: String, changed: [Property], invalidated: [String]) {
        self.interface = interface
        self.changed = changed
        self.invalidated = invalidated
    }

    /// The new value of `name`, if it changed (a linear search: a change carries a handful of properties).
    public subscript(name: String) -> DBusValue? {
        changed.first { $0.name == name }?.value
    }
}

// MARK: - Reading the standard signals straight from the message

extension DBusMessage {
    func readPropertiesChanged() throws -> PropertiesChange {
        var (iterator, interface) = try firstArgument(ifSignatureStartsWith: "sa{sv}", expected: "sa{sv}as")
        var changed: [PropertiesChange.Property] = []
        try Self.forEachProperty(of: &iterator) { changed.append(PropertiesChange.Property(name: $0, value: $1)) }
        var invalidated: [String] = []
        if libdbus_message_iter_next(&iterator), libdbus_message_iter_get_arg_type(&iterator) == CDBUS_TYPE_ARRAY,
            libdbus_message_iter_get_element_type(&iterator) == CDBUS_TYPE_STRING
        {
            invalidated = Self.readStrings(&iterator)
        }
        return PropertiesChange(interface: interface, changed: changed, invalidated: invalidated)
    }

    func readInterfacesAdded() throws -> (
        path: ObjectPath, interfaces: [(name: String, properties: [String: DBusValue])]
    ) {
        var (iterator, path) = try firstArgument(ifSignatureStartsWith: "oa{sa{sv}}")
        var interfaces: [(name: String, properties: [String: DBusValue])] = []
        try Self.forEachEntry(of: &iterator) { interface, properties in
            interfaces.append((interface, try Self.readProperties(&properties)))
        }
        return (ObjectPath(unchecked: path), interfaces)
    }

    func readInterfacesRemoved() throws -> (path: ObjectPath, interfaces: [String]) {
        var (iterator, path) = try firstArgument(ifSignatureStartsWith: "oas")
        return (ObjectPath(unchecked: path), Self.readStrings(&iterator))
    }

    /// The first argument (a string or object path) and an iterator at the second, when the message's signature
    /// starts with `prefix`; `DBusError.Code.typeMismatch` naming `expected` (default: `prefix`) otherwise.
    private func firstArgument(ifSignatureStartsWith prefix: String, expected: String? = nil) throws -> (
        MessageIterator, String
    ) {
        let signature = libdbus_message_get_signature(pointer)
        guard signature.hasPrefix(prefix) else {
            throw DBusError.typeMismatch(expected: expected ?? prefix, found: signature)
        }
        var iterator = MessageIterator()
        _ = libdbus_message_iter_init(pointer, &iterator)
        let first = libdbus_message_iter_get_string(&iterator)
        _ = libdbus_message_iter_next(&iterator)
        return (iterator, first)
    }

    /// The first argument when it is a string (a match rule's `arg0`), without reading the rest.
    var firstStringArgument: String? {
        var iterator = MessageIterator()
        guard libdbus_message_iter_init(pointer, &iterator),
            libdbus_message_iter_get_arg_type(&iterator) == CDBUS_TYPE_STRING
        else { return nil }
        return libdbus_message_iter_get_string(&iterator)
    }

    /// An `a{sv}` the iterator is at, each `v` taken off.
    static func readProperties(_ iterator: inout MessageIterator) throws -> [String: DBusValue] {
        var values: [String: DBusValue] = [:]
        try forEachProperty(of: &iterator) { values[$0] = $1 }
        return values
    }

    /// Each entry of the `a{sv}` the iterator is at, in wire order, its `v` taken off.
    private static func forEachProperty(of iterator: inout MessageIterator, _ body: (String, DBusValue) -> Void) throws
    {
        try forEachEntry(of: &iterator) { name, value in
            var variant = MessageIterator()
            libdbus_message_iter_recurse(&value, &variant)
            body(name, try read(&variant))
        }
    }

    /// An `as` the iterator is at.
    private static func readStrings(_ iterator: inout MessageIterator) -> [String] {
        var strings: [String] = []
        var items = MessageIterator()
        libdbus_message_iter_recurse(&iterator, &items)
        while libdbus_message_iter_get_arg_type(&items) != CDBUS_TYPE_INVALID {
            strings.append(libdbus_message_iter_get_string(&items))
            _ = libdbus_message_iter_next(&items)
        }
        return strings
    }
}
