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

    /// `org.freedesktop.DBus.Peer.Ping`: a round trip to `destination`.
    nonisolated(nonsending) public func ping(destination: String, timeout: Duration = .seconds(25)) async throws {
        _ = try await call(
            destination: destination, path: .root, interface: Self.peerInterface, method: "Ping", timeout: timeout)
    }
}
