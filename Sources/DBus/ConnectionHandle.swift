/// The owner of one private libdbus `DBusConnection*`: it closes the connection (a private connection must be
/// closed before its last reference goes, or libdbus aborts) and drops its reference in `deinit`.
///
/// ```swift
/// let handle = try ConnectionHandle.open(address: "unix:path=/run/dbus/system_bus_socket")
/// handle.close()
/// ```
final class ConnectionHandle: @unchecked Sendable {
    // @unchecked Sendable: after `open`, which runs on the connection's thread, the pointer is only used on
    // that thread (the actor's executor). `close()` runs there (see `DBusConnection.deinit`); the last reference,
    // and so `deinit`'s unref, may go on another thread, which libdbus allows once the connection is closed.

    let pointer: RawConnection
    private var isClosed = false

    private init(pointer: RawConnection) {
        self.pointer = pointer
    }

    /// Opens a private connection to `address` and registers it on the bus (`Hello`), within `timeout`.
    /// Blocks the calling thread.
    ///
    /// Not `dbus_bus_register`: it holds a process-wide libdbus lock while it blocks, and against a socket that
    /// accepts but never answers its authentication waits in `poll(-1)`: one silent bus would then hang every
    /// later connection in the process. Authentication is driven here in bounded rounds, and `Hello` is sent
    /// with a timeout, so a dead bus costs `timeout` and nothing else.
    static func open(address: String, timeout: Duration = .seconds(10)) throws -> (ConnectionHandle, uniqueName: String)
    {
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
        do {
            let uniqueName = try register(pointer, address: address, timeout: timeout)
            return (handle, uniqueName)
        } catch {
            handle.close()
            throw error
        }
    }

    private static func register(_ pointer: RawConnection, address: String, timeout: Duration) throws -> String {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while !libdbus_connection_get_is_authenticated(pointer) {
            guard libdbus_connection_get_is_connected(pointer) else {
                throw DBusError(
                    code: .connectFailed, message: "the bus at \(address) closed the connection while authenticating")
            }
            let left = clock.now.duration(to: deadline)
            guard left > .zero else {
                throw DBusError(
                    code: .connectFailed,
                    message:
                        """
                            the bus at \(address) did not complete authentication within \(timeout) (is the daemon \
                            stopped or overloaded?)
                            """
                )
            }
            libdbus_connection_read_write(pointer, timeoutMilliseconds: milliseconds(min(left, .milliseconds(100))))
        }
        let hello = try DBusMessage.methodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "Hello")
        let left = max(clock.now.duration(to: deadline), .milliseconds(1))
        let (reply, failure) = libdbus_connection_send_with_reply_and_block(
            pointer, hello.pointer, timeoutMilliseconds: milliseconds(left))
        guard let reply else {
            throw DBusError(
                code: .connectFailed, name: failure?.name,
                message: "cannot register on the bus at \(address): \(failure?.message ?? "no reply to Hello")")
        }
        let arguments = try DBusMessage(adopting: reply).arguments()
        guard case .string(let uniqueName)? = arguments.first, libdbus_bus_set_unique_name(pointer, uniqueName) else {
            throw DBusError(code: .connectFailed, message: "the bus at \(address) gave no unique name")
        }
        return uniqueName
    }

    /// A libdbus timeout in milliseconds, rounded up, at most `Int32.max` (libdbus's "no timeout").
    private static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 0 }
        let milliseconds = seconds.multipliedReportingOverflow(by: 1000)
        guard !milliseconds.overflow, milliseconds.partialValue < Int64(Int32.max) else { return Int32.max }
        return Int32(clamping: milliseconds.partialValue + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }

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
