/// Which signals a subscription receives: the bus-side match rule (`AddMatch`) and the same test applied
/// locally, so that each stream gets only its own signals even when several streams share the connection.
///
/// Every field that is set must match; `arg0` compares the first argument as a string.
///
/// ```swift
/// let rule = MatchRule(sender: "org.bluez", pathNamespace: "/org/bluez",
///                      interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
///                      arg0: "org.bluez.Device1")
/// for try await signal in try await bus.signals(matching: rule) { … }
/// ```
///
/// A well-known `sender` (like `org.bluez`) is resolved to its current unique owner with `GetNameOwner` and
/// followed through `NameOwnerChanged`; signals are delivered only when they come from that owner.
public struct MatchRule: Sendable, Hashable, CustomStringConvertible {
    public var sender: String?
    public var path: ObjectPath?
    public var pathNamespace: ObjectPath?
    public var interface: String?
    public var member: String?
    public var arg0: String?

    public init(
        sender: String? = nil, path: ObjectPath? = nil, pathNamespace: ObjectPath? = nil,
        interface: String? = nil, member: String? = nil, arg0: String? = nil
    ) {
        self.sender = sender
        self.path = path
        self.pathNamespace = pathNamespace
        self.interface = interface
        self.member = member
        self.arg0 = arg0
    }

    /// The rule in the bus's syntax: `type='signal',sender='org.bluez',…`.
    public var description: String {
        var text = "type='signal'"
        func add(_ key: String, _ value: String?) {
            guard let value else { return }
            // Inside quotes only the quote itself needs escaping, written as '\'' (close, escaped quote, open).
            text += ",\(key)='" + value.replacingQuotes() + "'"
        }
        add("sender", sender)
        add("path", path?.rawValue)
        add("path_namespace", pathNamespace?.rawValue)
        add("interface", interface)
        add("member", member)
        add("arg0", arg0)
        return text
    }

    /// Throws `DBusError.Code.invalidArgument` for names the bus would reject.
    func check() throws {
        if let sender { try Names.checkBusName(sender) }
        if let interface { try Names.checkInterface(interface) }
        if let member { try Names.checkMember(member) }
        if let arg0, !Names.hasNoNUL(arg0) { throw DBusError.invalidArgument("arg0 contains NUL") }
        if path != nil, pathNamespace != nil {
            throw DBusError.invalidArgument("a match rule cannot have both path and path_namespace")
        }
    }

    /// True when `sender` is a well-known name whose owner has to be looked up to filter locally.
    var senderNeedsResolution: Bool {
        guard let sender else { return false }
        return !sender.hasPrefix(":") && sender != DBusConnection.busName
    }

    /// The local test on the header fields; `owner` is the resolved unique name for a well-known sender.
    func matchesHeader(sender messageSender: String?, path messagePath: ObjectPath, interface messageInterface: String,
                       member messageMember: String, owner: String?) -> Bool {
        if let sender {
            let expected = senderNeedsResolution ? owner : sender
            guard let expected, messageSender == expected else { return false }
        }
        if let path, path != messagePath { return false }
        if let pathNamespace, !messagePath.isInNamespace(pathNamespace) { return false }
        if let interface, interface != messageInterface { return false }
        if let member, member != messageMember { return false }
        return true
    }
}

extension String {
    fileprivate func replacingQuotes() -> String {
        guard contains("'") else { return self }
        var result = ""
        for character in self {
            if character == "'" { result += "'\\''" } else { result.append(character) }
        }
        return result
    }
}
