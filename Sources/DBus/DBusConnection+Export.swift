// The server side: exported objects, their method calls, the Properties and ObjectManager interfaces.

extension DBusConnection {
    static let introspectableInterface = "org.freedesktop.DBus.Introspectable"
    static let propertiesInterface = "org.freedesktop.DBus.Properties"
    static let peerInterface = "org.freedesktop.DBus.Peer"
    static let objectManagerInterface = "org.freedesktop.DBus.ObjectManager"
    static let standardInterfaces: Set<String> = [
        introspectableInterface, propertiesInterface, peerInterface, objectManagerInterface,
    ]

    /// Exports `object` at `path`, replacing what was there. Under an object manager (`addObjectManager`),
    /// `InterfacesAdded` is emitted for interfaces that are new at `path` and `InterfacesRemoved` for those
    /// that went, before this returns.
    public func export(_ object: DBusObject, at path: ObjectPath) async throws {
        let exported = try ExportedObject(object)
        let previous = exportedObjects.updateValue(exported, forKey: path)
        guard let root = objectManagerRoot(for: path), state == .open else { return }
        let previousNames = Set(previous?.interfaceNames ?? [])
        let removed = (previous?.interfaceNames ?? []).filter { exported.interfaces[$0] == nil }
        if !removed.isEmpty { try emitInterfacesRemoved(path: path, interfaces: removed, root: root) }
        let added = exported.interfaceNames.filter { !previousNames.contains($0) }
        if !added.isEmpty {
            let value = try await Self.interfacesAndProperties(exported, only: added)
            try emitSignal(
                path: root, interface: Self.objectManagerInterface, member: "InterfacesAdded",
                arguments: [.objectPath(path), value])
        }
    }

    /// Removes the object at `path` (emitting `InterfacesRemoved` under an object manager).
    public func unexport(at path: ObjectPath) throws {
        guard let previous = exportedObjects.removeValue(forKey: path) else { return }
        guard let root = objectManagerRoot(for: path), state == .open else { return }
        try emitInterfacesRemoved(path: path, interfaces: previous.interfaceNames, root: root)
    }

    /// Makes `root` an `org.freedesktop.DBus.ObjectManager`: `GetManagedObjects` there returns every exported
    /// object below it, and exporting or unexporting below it emits InterfacesAdded/InterfacesRemoved.
    public func addObjectManager(at root: ObjectPath) {
        objectManagers.insert(root)
    }

    /// Emits `org.freedesktop.DBus.Properties.PropertiesChanged` from `path`.
    public func propertiesChanged(
        path: ObjectPath, interface: String, changed: [String: DBusValue], invalidated: [String] = []
    ) throws {
        try Names.checkInterface(interface)
        let entries = changed.sorted { $0.key < $1.key }.map {
            DBusDictionaryEntry(key: .string($0.key), value: .variant($0.value))
        }
        try emitSignal(
            path: path, interface: Self.propertiesInterface, member: "PropertiesChanged",
            arguments: [
                .string(interface), .dictionary(key: "s", value: "v", entries),
                .array(element: "s", invalidated.map(DBusValue.string)),
            ])
    }

    private func emitInterfacesRemoved(path: ObjectPath, interfaces: [String], root: ObjectPath) throws {
        try emitSignal(
            path: root, interface: Self.objectManagerInterface, member: "InterfacesRemoved",
            arguments: [.objectPath(path), .array(element: "s", interfaces.map(DBusValue.string))])
    }

    /// The nearest object manager strictly above `path`.
    private func objectManagerRoot(for path: ObjectPath) -> ObjectPath? {
        var candidate = path.parent
        while let current = candidate {
            if objectManagers.contains(current) { return current }
            candidate = current.parent
        }
        return nil
    }

    // MARK: Incoming method calls

    /// Called on the connection's thread for every incoming method call (Peer is answered by libdbus before this).
    func handleMethodCall(_ message: DBusMessage) {
        statistics.methodCallsReceived += 1
        guard let path = message.path, let member = message.member else { return }
        let interface = message.interface
        let object = exportedObjects[path]
        switch (interface, member) {
        case (let name, "Introspect")
        where name == Self.introspectableInterface
            || (name == nil && object?.method(member) == nil):
            guard object != nil || objectManagers.contains(path) || hasChildren(path) else {
                return replyError(message, DBusError.StandardName.unknownObject, "No such object path '\(path)'")
            }
            replyNow(message, [.string(introspectionXML(for: path))])
        case (Self.objectManagerInterface, "GetManagedObjects") where objectManagers.contains(path):
            let objects = exportedObjects.filter { $0.key.isDescendant(of: path) }
            replyLater(message, out: "a{oa{sa{sv}}}") {
                var entries: [DBusDictionaryEntry] = []
                for (childPath, child) in objects.sorted(by: { $0.key < $1.key }) {
                    let interfaces = try await Self.interfacesAndProperties(child, only: child.interfaceNames)
                    entries.append(DBusDictionaryEntry(key: .objectPath(childPath), value: interfaces))
                }
                return [.dictionary(key: "o", value: "a{sa{sv}}", entries)]
            }
        case (Self.propertiesInterface, _):
            guard let object else {
                return replyError(message, DBusError.StandardName.unknownObject, "No such object path '\(path)'")
            }
            handlePropertiesCall(message, object: object, path: path, member: member)
        default:
            guard let object else {
                return replyError(message, DBusError.StandardName.unknownObject, "No such object path '\(path)'")
            }
            if let interface, object.interfaces[interface] == nil {
                return replyError(
                    message, DBusError.StandardName.unknownMethod, "No such interface '\(interface)' at '\(path)'")
            }
            guard let method = interface.flatMap({ object.interfaces[$0]?.methods[member] }) ?? object.method(member)
            else {
                return replyError(
                    message, DBusError.StandardName.unknownMethod,
                    "No such method '\(member)' in interface '\(interface ?? "")' at '\(path)'")
            }
            if let expected = method.inSignature, !message.hasSignature(expected) {
                return replyError(
                    message, DBusError.StandardName.invalidArgs,
                    "Invalid arguments '\(message.signature)' to \(member), expecting '\(expected)'")
            }
            let sender = message.sender
            let handler = method.handler
            let afterReply = AfterReplyActions()
            replyLater(message, out: method.outSignature, afterReply: afterReply) { [self] in
                let call = DBusMethodCall(
                    sender: sender, path: path, interface: interface, member: member,
                    arguments: try message.arguments(), connection: self, afterReplyActions: afterReply)
                return try await handler(call)
            }
        }
    }

    private func handlePropertiesCall(_ message: DBusMessage, object: ExportedObject, path: ObjectPath, member: String)
    {
        let expected: DBusSignature
        switch member {
        case "Get": expected = "ss"
        case "Set": expected = "ssv"
        case "GetAll": expected = "s"
        default:
            return replyError(message, DBusError.StandardName.unknownMethod, "No such method '\(member)' in Properties")
        }
        guard message.hasSignature(expected), let arguments = try? message.arguments(),
            let interfaceName = arguments.first?.string
        else {
            return replyError(
                message, DBusError.StandardName.invalidArgs,
                "Invalid arguments '\(message.signature)' to \(member), expecting '\(expected)'")
        }
        guard let interface = object.interfaces[interfaceName] else {
            if member == "GetAll", Self.standardInterfaces.contains(interfaceName) {
                return replyNow(message, [.dictionary(key: "s", value: "v", [])])
            }
            return replyError(message, DBusError.StandardName.unknownInterface, "No such interface '\(interfaceName)'")
        }
        if member == "GetAll" {
            return replyLater(message, out: "a{sv}") { [interface] in
                [try await Self.properties(of: interface)]
            }
        }
        let propertyName = arguments[1].string ?? ""
        guard let property = interface.properties[propertyName], property.isPresent else {
            return replyError(message, DBusError.StandardName.unknownProperty, "No such property '\(propertyName)'")
        }
        if member == "Get" {
            guard let get = property.get else {
                return replyError(
                    message, DBusError.StandardName.accessDenied, "Property '\(propertyName)' is write-only")
            }
            return replyLater(message, out: "v") {
                [.variant(try await Self.read(property, get))]
            }
        }
        guard let set = property.set else {
            return replyError(
                message, DBusError.StandardName.propertyReadOnly, "Property '\(propertyName)' is read-only")
        }
        let value = arguments[2].variant ?? arguments[2]
        guard value.hasSignature(property.signature) else {
            return replyError(
                message, DBusError.StandardName.invalidArgs,
                "Property '\(propertyName)' has type '\(property.signature)', not '\(value.signature)'")
        }
        replyLater(message, out: "") { [self] in
            try await set(value)
            var current = value
            if let get = property.get { current = try await Self.read(property, get) }
            // Like BlueZ: the PropertiesChanged leaves before the method reply.
            try await propertiesChanged(path: path, interface: interfaceName, changed: [propertyName: current])
            return []
        }
    }

    // MARK: Replies

    /// Runs `body` in a task of its own and replies with its result; handlers may finish in any order.
    private func replyLater(
        _ message: DBusMessage, out signature: DBusSignature?, afterReply: AfterReplyActions? = nil,
        _ body: @escaping @Sendable () async throws -> [DBusValue]
    ) {
        // Started on the connection's thread, as its task executor: handlers begin in the order their calls
        // arrived and run until they first suspend before the next one begins — a service's main loop, as
        // bluetoothd has. (Detached tasks on the global pool raced: a Disconnect could run before the Connect
        // sent just ahead of it had registered its pending connection, leaving a link up.)
        Task(executorPreference: taskRole) { [self] in
            let result: Result<[DBusValue], any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            await finishCall(message, result, out: signature, afterReply: afterReply)
        }
    }

    private func finishCall(
        _ message: DBusMessage, _ result: Result<[DBusValue], any Error>, out: DBusSignature?,
        afterReply: AfterReplyActions?
    ) async {
        sendReply(message, result, out: out)
        // Still on the connection's executor: anything these send is queued after the reply.
        for action in afterReply?.take() ?? [] { await action(self) }
    }

    private func sendReply(_ message: DBusMessage, _ result: Result<[DBusValue], any Error>, out: DBusSignature?) {
        switch result {
        case .success(let values):
            if let out, !values.signature.isSameType(as: out) {
                replyError(
                    message, DBusError.StandardName.failed,
                    "the handler returned '\(values.signature)' but declared '\(out)'")
            } else {
                replyNow(message, values)
            }
        case .failure(let error as DBusError):
            if let name = error.name {
                replyError(message, name, error.message)
            } else if error.code == .typeMismatch || error.code == .invalidArgument {
                replyError(message, DBusError.StandardName.invalidArgs, error.message)
            } else {
                replyError(message, DBusError.StandardName.failed, error.message)
            }
        case .failure(let error):
            replyError(message, DBusError.StandardName.failed, String(describing: error))
        }
    }

    private func replyNow(_ message: DBusMessage, _ values: [DBusValue]) {
        guard message.expectsReply, state == .open else { return }
        do {
            let reply = try message.makeReturn()
            try reply.appendArguments(values)
            try sendNow(reply)
        } catch {
            replyError(message, DBusError.StandardName.failed, "cannot send the reply: \(error)")
        }
    }

    private func replyError(_ message: DBusMessage, _ name: String, _ text: String) {
        guard message.expectsReply, state == .open, let reply = try? message.makeError(name: name, text: text) else {
            return
        }
        try? sendNow(reply)
    }

    // MARK: Properties as values

    private static func read(_ property: DBusProperty, _ get: @Sendable () async throws -> DBusValue) async throws
        -> DBusValue
    {
        let value = try await get()
        guard value.hasSignature(property.signature) else {
            throw DBusError(
                name: DBusError.StandardName.failed,
                message: "property \(property.name) returned '\(value.signature)', declared '\(property.signature)'")
        }
        return value
    }

    /// `a{sv}` of every readable property of `interface`.
    static func properties(of interface: ExportedObject.Interface) async throws -> DBusValue {
        var entries: [DBusDictionaryEntry] = []
        for property in interface.declaration.properties where property.isPresent {
            guard let get = property.get else { continue }
            entries.append(
                DBusDictionaryEntry(key: .string(property.name), value: .variant(try await read(property, get))))
        }
        return .dictionary(key: "s", value: "v", entries)
    }

    /// `a{sa{sv}}` of the named interfaces of `object` with their properties.
    static func interfacesAndProperties(_ object: ExportedObject, only names: [String]) async throws -> DBusValue {
        var entries: [DBusDictionaryEntry] = []
        for name in names {
            guard let interface = object.interfaces[name] else { continue }
            entries.append(DBusDictionaryEntry(key: .string(name), value: try await properties(of: interface)))
        }
        return .dictionary(key: "s", value: "a{sv}", entries)
    }

    func hasChildren(_ path: ObjectPath) -> Bool {
        exportedObjects.keys.contains { $0.isDescendant(of: path) }
    }
}

extension ExportedObject {
    /// The method named `member` in any interface (for calls that do not name the interface).
    func method(_ member: String) -> DBusMethod? {
        for name in interfaceNames {
            if let method = interfaces[name]?.methods[member] { return method }
        }
        return nil
    }
}

extension DBusSignature {
    func isSameType(as other: DBusSignature) -> Bool { rawValue == other.rawValue }
}
