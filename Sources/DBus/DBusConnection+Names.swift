// Owning well-known names on the bus.

/// Flags of `RequestName` (`DBUS_NAME_FLAG_*`).
///
/// ```swift
/// try await bus.requestName("org.example.Sim", flags: [.replaceExisting, .doNotQueue])
/// ```
public struct RequestNameFlags: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let allowReplacement = RequestNameFlags(rawValue: 0x1)
    public static let replaceExisting = RequestNameFlags(rawValue: 0x2)
    public static let doNotQueue = RequestNameFlags(rawValue: 0x4)
}

/// The answer to `RequestName` (`DBUS_REQUEST_NAME_REPLY_*`).
///
/// ```swift
/// guard try await bus.requestName("org.example.Sim") == .primaryOwner else { … }
/// ```
public enum RequestNameReply: UInt32, Sendable {
    case primaryOwner = 1, inQueue = 2, exists = 3, alreadyOwner = 4
}

/// The answer to `ReleaseName` (`DBUS_RELEASE_NAME_REPLY_*`).
public enum ReleaseNameReply: UInt32, Sendable {
    case released = 1, nonExistent = 2, notOwner = 3
}

extension DBusConnection {
    /// Asks the bus for a well-known name.
    nonisolated(nonsending) public func requestName(_ name: String, flags: RequestNameFlags = [.doNotQueue])
        async throws
        -> RequestNameReply
    {
        try Names.checkBusName(name)
        let reply = try await call(
            destination: Self.busName, path: Self.busPath, interface: Self.busName, method: "RequestName",
            arguments: [.string(name), .uint32(flags.rawValue)])
        let code = try reply.decode(UInt32.self)
        guard let result = RequestNameReply(rawValue: code) else {
            throw DBusError(code: .typeMismatch, message: "unknown RequestName reply \(code)")
        }
        return result
    }

    /// Gives a well-known name back.
    @discardableResult
    nonisolated(nonsending) public func releaseName(_ name: String) async throws -> ReleaseNameReply {
        try Names.checkBusName(name)
        let reply = try await call(
            destination: Self.busName, path: Self.busPath, interface: Self.busName, method: "ReleaseName",
            arguments: [.string(name)])
        let code = try reply.decode(UInt32.self)
        guard let result = ReleaseNameReply(rawValue: code) else {
            throw DBusError(code: .typeMismatch, message: "unknown ReleaseName reply \(code)")
        }
        return result
    }

    /// The unique name owning `name`, or nil when nobody owns it.
    nonisolated(nonsending) public func nameOwner(of name: String) async throws -> String? {
        try Names.checkBusName(name)
        do {
            let reply = try await call(
                destination: Self.busName, path: Self.busPath, interface: Self.busName, method: "GetNameOwner",
                arguments: [.string(name)])
            return try reply.decode(String.self)
        } catch let error as DBusError where error.name == DBusError.StandardName.nameHasNoOwner {
            return nil
        }
    }
}
