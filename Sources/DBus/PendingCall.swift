/// The owner of one libdbus `DBusPendingCall*` (the reference `dbus_connection_send_with_reply` hands out),
/// dropped in `deinit`.
///
/// ```swift
/// let pending = PendingCall(pointer)
/// if pending.isCompleted { let reply = pending.stealReply() }
/// ```
final class PendingCall: @unchecked Sendable {
    // @unchecked Sendable: only used on the connection's thread; libdbus counts its references atomically.

    let pointer: RawPendingCall

    init(adopting pointer: RawPendingCall) {
        self.pointer = pointer
    }

    deinit {
        libdbus_pending_call_unref(pointer)
    }

    var isCompleted: Bool { libdbus_pending_call_get_completed(pointer) }

    func stealReply() -> DBusMessage? {
        libdbus_pending_call_steal_reply(pointer).map(DBusMessage.init(adopting:))
    }

    func cancel() {
        libdbus_pending_call_cancel(pointer)
    }
}
