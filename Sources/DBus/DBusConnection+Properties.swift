// Client helpers for org.freedesktop.DBus.Properties and org.freedesktop.DBus.ObjectManager.

extension DBusConnection {
    /// `org.freedesktop.DBus.Properties.Get`, with the variant unwrapped.
    ///
    /// ```swift
    /// let powered = try await bus.getProperty("Powered", interface: "org.bluez.Adapter1",
    ///                                         destination: "org.bluez", path: "/org/bluez/hci0").decode(Bool.self)
    /// ```
    nonisolated(nonsending) public func getProperty(
        _ name: String, interface: String, destination: String?, path: ObjectPath, timeout: Duration = .seconds(25)
    ) async throws -> DBusValue {
        let reply = try await call(
            destination: destination, path: path, interface: Self.propertiesInterface, method: "Get",
            arguments: [.string(interface), .string(name)], expecting: "v", timeout: timeout)
        return try reply.decode(DBusValue.self)
    }

    /// `org.freedesktop.DBus.Properties.Set`.
    nonisolated(nonsending) public func setProperty(
        _ name: String, interface: String, value: DBusValue, destination: String?, path: ObjectPath,
        timeout: Duration = .seconds(25)
    ) async throws {
        _ = try await call(
            destination: destination, path: path, interface: Self.propertiesInterface, method: "Set",
            arguments: [.string(interface), .string(name), .variant(value)], timeout: timeout)
    }

    /// `org.freedesktop.DBus.Properties.GetAll`, variants unwrapped.
    nonisolated(nonsending) public func getAllProperties(
        interface: String, destination: String?, path: ObjectPath, timeout: Duration = .seconds(25)
    ) async throws -> [String: DBusValue] {
        let reply = try await call(
            destination: destination, path: path, interface: Self.propertiesInterface, method: "GetAll",
            arguments: [.string(interface)], expecting: "a{sv}", timeout: timeout)
        return try reply.decode([String: DBusValue].self)
    }

    /// `org.freedesktop.DBus.ObjectManager.GetManagedObjects`: path → interface → property → value.
    ///
    /// ```swift
    /// let objects = try await bus.getManagedObjects(destination: "org.bluez", path: "/")
    /// let adapters = objects.filter { $0.value["org.bluez.Adapter1"] != nil }
    /// ```
    nonisolated(nonsending) public func getManagedObjects(
        destination: String?, path: ObjectPath = .root, timeout: Duration = .seconds(25)
    ) async throws -> [ObjectPath: [String: [String: DBusValue]]] {
        let reply = try await call(
            destination: destination, path: path, interface: Self.objectManagerInterface,
            method: "GetManagedObjects", expecting: "a{oa{sa{sv}}}", timeout: timeout)
        return try reply.decode([ObjectPath: [String: [String: DBusValue]]].self)
    }

    /// `GetManagedObjects`, read object by object: `body` gets each interface of each object with its properties
    /// (their `v` wrappers taken off) while the reply is walked, so the whole tree is never built. At 10,000 BlueZ
    /// devices the tree (the values, then the nested dictionaries decoded from them) was 50 MiB beside the cache
    /// being filled from it (Benchmarks/NOTES.md). Throws `DBusError.Code.typeMismatch` when the reply is not
    /// `a{oa{sa{sv}}}`, and what `body` throws.
    ///
    /// ```swift
    /// var adapters: [ObjectPath] = []
    /// try await bus.getManagedObjects(destination: "org.bluez") { path, interface, _ in
    ///     if interface == "org.bluez.Adapter1" { adapters.append(path) }
    /// }
    /// ```
    nonisolated(nonsending) public func getManagedObjects(
        destination: String?, path: ObjectPath = .root, timeout: Duration = .seconds(25),
        each body: (ObjectPath, _ interface: String, _ properties: [String: DBusValue]) throws -> Void
    ) async throws {
        let message = try DBusMessage.methodCall(
            destination: destination, path: path, interface: Self.objectManagerInterface, member: "GetManagedObjects")
        try await sendWithReply(message, timeout: timeout).forEachManagedObject(body)
    }

    /// `org.freedesktop.DBus.Peer.Ping`: a round trip to `destination`.
    nonisolated(nonsending) public func ping(destination: String, timeout: Duration = .seconds(25)) async throws {
        _ = try await call(
            destination: destination, path: .root, interface: Self.peerInterface, method: "Ping", timeout: timeout)
    }
}
