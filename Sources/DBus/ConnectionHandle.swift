/// The owner of one private libdbus `DBusConnection*`: it closes the connection (a private connection must be
/// closed before its last reference goes, or libdbus aborts) and drops its reference in `deinit`.
///
/// ```swift
/// let handle = try ConnectionHandle.open(address: "unix:path=/run/dbus/system_bus_socket")
/// handle.close()
/// ```
final class ConnectionHandle: @unchecked Sendable {
    // @unchecked Sendable: after `open`, which runs on the connection's queue, the pointer is only used on
    // that queue (the actor's executor); `deinit` is arranged to run there too (see `DBusConnection.deinit`).

    let pointer: RawConnection
    private var isClosed = false

    private init(pointer: RawConnection) {
        self.pointer = pointer
    }

    /// Opens a private connection to `address` and registers it on the bus (`Hello`). Blocks the calling thread.
    static func open(address: String) throws -> (ConnectionHandle, uniqueName: String) {
        libdbus_threads_init_default()
        guard Names.hasNoNUL(address) else { throw DBusError.invalidArgument("bus address contains NUL") }
        let (pointer, failure) = libdbus_connection_open_private(address)
        guard let pointer else {
            throw DBusError(
                code: .connectFailed, name: failure?.name,
                message: "cannot connect to \(address): \(failure?.message ?? "unknown error")")
        }
        let handle = ConnectionHandle(pointer: pointer)
        // A private connection defaults to false already; say it, because `true` would _exit() the process.
        libdbus_connection_set_exit_on_disconnect(pointer, false)
        if let failure = libdbus_bus_register(pointer) {
            handle.close()
            throw DBusError(
                code: .connectFailed, name: failure.name,
                message: "cannot register on the bus at \(address): \(failure.message)")
        }
        guard let uniqueName = libdbus_bus_get_unique_name(pointer) else {
            handle.close()
            throw DBusError(code: .connectFailed, message: "the bus at \(address) gave no unique name")
        }
        return (handle, uniqueName)
    }

    var isConnected: Bool { !isClosed && libdbus_connection_get_is_connected(pointer) }

    /// Clears the dispatch-status function (a queued drain must not run into a closed connection) and closes.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        libdbus_connection_set_dispatch_status_function(pointer, nil, data: nil, free: nil)
        libdbus_connection_close(pointer)
    }

    deinit {
        close()
        libdbus_connection_unref(pointer)
    }
}
