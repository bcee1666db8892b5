import CDBus

/// The owner of one libdbus `DBusMessage*`: it holds one reference and drops it in `deinit`.
///
/// Internal: the public API speaks in `DBusValue`, `DBusSignal` and `DBusMethodCall`, never in messages.
///
/// ```swift
/// let message = try DBusMessage.methodCall(destination: "org.bluez", path: "/", interface: nil,
///                                          member: "GetManagedObjects")
/// try message.appendArguments([])
/// ```
final class DBusMessage: @unchecked Sendable {
    // @unchecked Sendable: libdbus counts message references atomically, a message is only written while it
    // is being built (by one task, before it is sent) and only read after that; reading the header or walking
    // the arguments keeps its iterator on the reader's stack and does not change the message.

    let pointer: RawMessage

    /// Takes over a reference the caller owns (a `dbus_message_new_*` result or a stolen reply).
    init(adopting pointer: RawMessage) {
        self.pointer = pointer
    }

    /// Adds a reference of its own to a message libdbus lent us (a filter's argument).
    init(retaining pointer: RawMessage) {
        libdbus_message_ref(pointer)
        self.pointer = pointer
    }

    deinit {
        libdbus_message_unref(pointer)
    }

    // MARK: Making messages (every name is validated first: libdbus aborts on invalid ones)

    static func methodCall(
        destination: String?, path: ObjectPath, interface: String?, member: String
    ) throws -> DBusMessage {
        if let destination { try Names.checkBusName(destination) }
        if let interface { try Names.checkInterface(interface) }
        try Names.checkMember(member)
        guard let pointer = libdbus_message_new_method_call(
            destination: destination, path: path.rawValue, interface: interface, member: member)
        else { throw DBusError.outOfMemory }
        return DBusMessage(adopting: pointer)
    }

    static func signal(path: ObjectPath, interface: String, member: String, destination: String?) throws
        -> DBusMessage
    {
        try Names.checkInterface(interface)
        try Names.checkMember(member)
        if let destination { try Names.checkBusName(destination) }
        guard let pointer = libdbus_message_new_signal(path: path.rawValue, interface: interface, member: member)
        else { throw DBusError.outOfMemory }
        let message = DBusMessage(adopting: pointer)
        if let destination, !libdbus_message_set_destination(pointer, destination) { throw DBusError.outOfMemory }
        return message
    }

    /// The method return for this method call.
    func makeReturn() throws -> DBusMessage {
        guard let pointer = libdbus_message_new_method_return(self.pointer) else { throw DBusError.outOfMemory }
        return DBusMessage(adopting: pointer)
    }

    /// An error reply to this method call; an invalid `name` becomes `org.freedesktop.DBus.Error.Failed`.
    func makeError(name: String, text: String) throws -> DBusMessage {
        let safeName = Names.isValidErrorName(name) ? name : DBusError.StandardName.failed
        let safeText = Names.hasNoNUL(text) ? text : String(text.split(separator: "\0").first ?? "")
        guard let pointer = libdbus_message_new_error(self.pointer, name: safeName, text: safeText)
        else { throw DBusError.outOfMemory }
        return DBusMessage(adopting: pointer)
    }

    // MARK: Header

    enum Kind {
        case methodCall, methodReturn, error, signal, other
    }

    var kind: Kind {
        switch libdbus_message_get_type(pointer) {
        case DBUS_MESSAGE_TYPE_METHOD_CALL: .methodCall
        case DBUS_MESSAGE_TYPE_METHOD_RETURN: .methodReturn
        case DBUS_MESSAGE_TYPE_ERROR: .error
        case DBUS_MESSAGE_TYPE_SIGNAL: .signal
        default: .other
        }
    }

    var sender: String? { libdbus_message_get_sender(pointer) }
    var destination: String? { libdbus_message_get_destination(pointer) }
    var path: ObjectPath? { libdbus_message_get_path(pointer).map(ObjectPath.init(unchecked:)) }
    var interface: String? { libdbus_message_get_interface(pointer) }
    var member: String? { libdbus_message_get_member(pointer) }
    var errorName: String? { libdbus_message_get_error_name(pointer) }
    /// The serial of the call a method return or error answers (0 for other messages).
    var replySerial: UInt32 { libdbus_message_get_reply_serial(pointer) }
    var signature: DBusSignature { DBusSignature(unchecked: libdbus_message_get_signature(pointer)) }

    func hasSignature(_ signature: DBusSignature) -> Bool {
        libdbus_message_has_signature(pointer, signature.rawValue)
    }

    var expectsReply: Bool { !libdbus_message_get_no_reply(pointer) }

    func setNoReply() { libdbus_message_set_no_reply(pointer, true) }

    /// The `org.freedesktop.DBus.Local.Disconnected` signal libdbus queues when the transport goes away.
    var isLocalDisconnected: Bool {
        libdbus_message_is_signal(pointer, interface: "org.freedesktop.DBus.Local", member: "Disconnected")
    }
}
