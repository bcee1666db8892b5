import Basics

/// An object to export on the bus: a set of interfaces with methods, properties and signals.
///
/// The standard interfaces come for free at every exported path: `org.freedesktop.DBus.Introspectable`
/// (with child nodes), `org.freedesktop.DBus.Properties` (Get/Set/GetAll over the `properties` below, and a
/// `PropertiesChanged` after every successful Set) and `org.freedesktop.DBus.Peer` (answered by libdbus).
///
/// ```swift
/// let echo = DBusObject(interfaces: [
///     DBusInterface("org.example.Echo", methods: [
///         DBusMethod("Echo", in: "s", out: "s") { call in call.arguments },
///         DBusMethod("Fail") { _ in throw DBusError(name: "org.example.Error.Nope", message: "no") },
///     ], properties: [
///         DBusProperty("Version", signature: "u", get: { .uint32(1) }),
///     ], signals: [DBusSignalDeclaration("Ticked", signature: "t")]),
/// ])
/// try await connection.export(echo, at: "/org/example/echo")
/// ```
public struct DBusObject: Sendable {
    public var interfaces: [DBusInterface]

    public init(interfaces: [DBusInterface]) {
        self.interfaces = interfaces
    }
}

/// One interface of an exported object.
///
/// ```swift
/// DBusInterface("org.bluez.Adapter1", methods: [startDiscovery], properties: [powered])
/// ```
public struct DBusInterface: Sendable {
    public var name: String
    public var methods: [DBusMethod]
    public var properties: [DBusProperty]
    public var signals: [DBusSignalDeclaration]

    public init(
        _ name: String, methods: [DBusMethod] = [], properties: [DBusProperty] = [],
        signals: [DBusSignalDeclaration] = []
    ) {
        self.name = name
        self.methods = methods
        self.properties = properties
        self.signals = signals
    }
}

/// A method of an exported interface.
///
/// The handler runs in a task of its own, so it may answer later and in any order with other calls (a
/// simulated `ReadValue` may emit `PropertiesChanged` first and reply after). Throwing
/// `DBusError(name:message:)` sends that D-Bus error; any other error is sent as
/// `org.freedesktop.DBus.Error.Failed` (`InvalidArgs` for `DBusError.Code.typeMismatch`).
///
/// ```swift
/// DBusMethod("ReadValue", in: "a{sv}", out: "ay") { call in
///     try await call.connection.propertiesChanged(path: call.path, interface: "org.bluez.GattCharacteristic1",
///                                                 changed: ["Value": .bytes(value)])
///     return [.bytes(value)]                 // the reply leaves after the signal
/// }
/// ```
public struct DBusMethod: Sendable {
    public typealias Handler = @Sendable (DBusMethodCall) async throws -> [DBusValue]

    public var name: String
    /// The arguments the method takes; calls with another signature get `InvalidArgs`. Nil accepts any.
    public var inSignature: DBusSignature?
    /// What the handler returns; a different reply becomes an error. Nil allows any.
    public var outSignature: DBusSignature?
    /// Argument names for introspection (optional, in order).
    public var inNames: [String]
    public var outNames: [String]
    public var handler: Handler

    public init(
        _ name: String, in inSignature: DBusSignature? = "", out outSignature: DBusSignature? = "",
        inNames: [String] = [], outNames: [String] = [], handler: @escaping Handler
    ) {
        self.name = name
        self.inSignature = inSignature
        self.outSignature = outSignature
        self.inNames = inNames
        self.outNames = outNames
        self.handler = handler
    }
}

/// A property of an exported interface; readable with `get`, writable with `set`.
///
/// ```swift
/// DBusProperty("Powered", signature: "b", get: { .boolean(await adapter.powered) },
///              set: { value in try await adapter.setPowered(value.decode(Bool.self)) })
/// ```
public struct DBusProperty: Sendable {
    public enum Access: String, Sendable {
        case read, write, readwrite
    }

    public var name: String
    public var signature: DBusSignature
    public var get: (@Sendable () async throws -> DBusValue)?
    public var set: (@Sendable (DBusValue) async throws -> Void)?
    /// Whether the property exists right now (BlueZ's gdbus `exists` callback, e.g. Device1.RSSI only while
    /// discovering). An absent property is left out of GetAll, GetManagedObjects and InterfacesAdded, and Get
    /// answers `InvalidArgs` "No such property". Nil: always present.
    public var exists: (@Sendable () -> Bool)?

    public init(
        _ name: String, signature: DBusSignature, get: (@Sendable () async throws -> DBusValue)?,
        set: (@Sendable (DBusValue) async throws -> Void)? = nil, exists: (@Sendable () -> Bool)? = nil
    ) {
        self.name = name
        self.signature = signature
        self.get = get
        self.set = set
        self.exists = exists
    }

    /// True unless `exists` says the property is absent now.
    var isPresent: Bool { exists?() ?? true }

    public var access: Access {
        switch (get != nil, set != nil) {
        case (true, true): .readwrite
        case (false, true): .write
        default: .read
        }
    }
}

/// A signal an interface declares (for introspection; emit it with `DBusConnection.emitSignal`).
///
/// ```swift
/// DBusSignalDeclaration("Ticked", signature: "t", names: ["count"])
/// ```
public struct DBusSignalDeclaration: Sendable {
    public var name: String
    public var signature: DBusSignature
    public var names: [String]

    public init(_ name: String, signature: DBusSignature = "", names: [String] = []) {
        self.name = name
        self.signature = signature
        self.names = names
    }
}

/// An incoming method call, as a handler sees it.
///
/// ```swift
/// DBusMethod("Hello", in: "s", out: "s") { call in
///     let name = try call.arguments.decode(String.self)
///     return [.string("hello \(name) from \(call.sender ?? "?")")]
/// }
/// ```
public struct DBusMethodCall: Sendable {
    /// The caller's unique name.
    public var sender: String?
    public var path: ObjectPath
    /// Nil when the caller did not name the interface.
    public var interface: String?
    public var member: String
    public var arguments: [DBusValue]
    /// The connection the call came in on (to emit signals before replying).
    public var connection: DBusConnection
    let afterReplyActions: AfterReplyActions

    /// Runs `action` on the connection right after the reply (or error) to this call has been queued, so that
    /// what it sends follows the reply on the wire, as bluetoothd's InterfacesAdded follow its Connect reply.
    /// Actions run in the order they were added; nothing runs when the handler never returns.
    ///
    /// ```swift
    /// call.afterReply { connection in
    ///     try? connection.propertiesChanged(path: call.path, interface: "org.bluez.Device1",
    ///                                       changed: ["ServicesResolved": .boolean(true)])
    /// }
    /// ```
    public func afterReply(_ action: @escaping @Sendable (isolated DBusConnection) async -> Void) {
        afterReplyActions.add(action)
    }
}

/// The actions a handler registered with `DBusMethodCall.afterReply`.
final class AfterReplyActions: Sendable {
    typealias Action = @Sendable (isolated DBusConnection) async -> Void
    private let actions = Locked<[Action]>([])

    func add(_ action: @escaping Action) {
        actions.withLock { $0.append(action) }
    }

    func take() -> [Action] {
        actions.withLock { actions in
            defer { actions.removeAll() }
            return actions
        }
    }
}

/// An exported object with its lookup tables.
struct ExportedObject: Sendable {
    struct Interface: Sendable {
        let declaration: DBusInterface
        let methods: [String: DBusMethod]
        let properties: [String: DBusProperty]
    }

    let interfaceNames: [String]
    let interfaces: [String: Interface]

    init(_ object: DBusObject) throws {
        var names: [String] = []
        var interfaces: [String: Interface] = [:]
        for interface in object.interfaces {
            try Names.checkInterface(interface.name)
            guard interfaces[interface.name] == nil, !DBusConnection.standardInterfaces.contains(interface.name)
            else { throw DBusError.invalidArgument("interface \(interface.name) is given twice or is standard") }
            var methods: [String: DBusMethod] = [:]
            for method in interface.methods {
                try Names.checkMember(method.name)
                methods[method.name] = method
            }
            var properties: [String: DBusProperty] = [:]
            for property in interface.properties {
                try Names.checkMember(property.name)
                guard property.signature.isSingleCompleteType else {
                    throw DBusError.invalidArgument("property \(property.name) needs a single complete type")
                }
                properties[property.name] = property
            }
            for signal in interface.signals { try Names.checkMember(signal.name) }
            names.append(interface.name)
            interfaces[interface.name] = Interface(declaration: interface, methods: methods, properties: properties)
        }
        self.interfaceNames = names
        self.interfaces = interfaces
    }
}
