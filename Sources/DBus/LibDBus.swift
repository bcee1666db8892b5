import CDBus

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// Every raw libdbus call made by this module lives in this file, the way swift-system keeps its syscalls in
// `Internals/Syscalls.swift`: one place to audit what crosses into C, with the C name in each wrapper's name.
// The rest of the module goes through these wrappers and through the owner classes (`ConnectionHandle`,
// `DBusMessage`), never through `dbus_*` directly. The two Unix calls `UnixFileDescriptor` makes
// (`fcntl`, `close`) are kept here too, at the end.
//
// Two rules of libdbus shape the callers: invalid names, paths or signatures make most of its entry points
// *abort the process* (its "check failed" warnings are fatal by default), so callers validate first with the
// `libdbus_validate_*` wrappers; and a private connection must be closed before its last reference goes.

/// `DBusConnection*`
typealias RawConnection = OpaquePointer
/// `DBusMessage*`
typealias RawMessage = OpaquePointer
/// `DBusWatch*`
typealias RawWatch = OpaquePointer
/// `DBusTimeout*`
typealias RawTimeout = OpaquePointer
/// libdbus's own iterator, a plain struct that lives on the caller's stack.
typealias MessageIterator = DBusMessageIter

/// The name and text of a C `DBusError` once it was set.
struct LibDBusFailure: Sendable {
    var name: String
    var message: String
}

/// Runs `body` with an initialised C `DBusError` and frees it again (`dbus_error_init`/`dbus_error_free`).
private func withCError<R>(_ body: (UnsafeMutablePointer<CDBus.DBusError>) -> R) -> (R, LibDBusFailure?) {
    var error = CDBus.DBusError()
    dbus_error_init(&error)
    let result = body(&error)
    var failure: LibDBusFailure?
    if dbus_error_is_set(&error) != 0 {
        failure = LibDBusFailure(
            name: error.name.map { String(cString: $0) } ?? "",
            message: error.message.map { String(cString: $0) } ?? ""
        )
        dbus_error_free(&error)
    }
    return (result, failure)
}

private func optionalString(_ pointer: UnsafePointer<CChar>?) -> String? {
    pointer.map { String(cString: $0) }
}

/// Calls `body` with a C string for an optional Swift string (nil stays NULL).
private func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}

// MARK: - Library

/// `dbus_threads_init_default`: idempotent; makes libdbus's own locks real before any connection exists.
func libdbus_threads_init_default() {
    _ = dbus_threads_init_default()
}

// MARK: - Validation (each of these is safe on any input that has no NUL byte)

/// `dbus_validate_path`
func libdbus_validate_path(_ path: String) -> Bool {
    path.withCString { dbus_validate_path($0, nil) != 0 }
}

/// `dbus_validate_interface`
func libdbus_validate_interface(_ name: String) -> Bool {
    name.withCString { dbus_validate_interface($0, nil) != 0 }
}

/// `dbus_validate_member`
func libdbus_validate_member(_ name: String) -> Bool {
    name.withCString { dbus_validate_member($0, nil) != 0 }
}

/// `dbus_validate_bus_name`
func libdbus_validate_bus_name(_ name: String) -> Bool {
    name.withCString { dbus_validate_bus_name($0, nil) != 0 }
}

/// `dbus_validate_error_name`
func libdbus_validate_error_name(_ name: String) -> Bool {
    name.withCString { dbus_validate_error_name($0, nil) != 0 }
}

/// `dbus_signature_validate`
func libdbus_signature_validate(_ signature: String) -> Bool {
    signature.withCString { dbus_signature_validate($0, nil) != 0 }
}

// MARK: - Connection

/// `dbus_connection_open_private`
func libdbus_connection_open_private(_ address: String) -> (RawConnection?, LibDBusFailure?) {
    address.withCString { address in withCError { dbus_connection_open_private(address, $0) } }
}

/// `dbus_connection_get_is_authenticated`
func libdbus_connection_get_is_authenticated(_ connection: RawConnection) -> Bool {
    dbus_connection_get_is_authenticated(connection) != 0
}

/// `dbus_connection_read_write`: one bounded round of I/O (used only while authenticating, before the main
/// loop is installed).
@discardableResult
func libdbus_connection_read_write(_ connection: RawConnection, timeoutMilliseconds: Int32) -> Bool {
    dbus_connection_read_write(connection, timeoutMilliseconds) != 0
}

/// `dbus_connection_send_with_reply_and_block`: returns the reply (retained by the caller) or the failure.
func libdbus_connection_send_with_reply_and_block(
    _ connection: RawConnection, _ message: RawMessage, timeoutMilliseconds: Int32
) -> (RawMessage?, LibDBusFailure?) {
    withCError { dbus_connection_send_with_reply_and_block(connection, message, timeoutMilliseconds, $0) }
}

/// `dbus_bus_set_unique_name`: records the name `Hello` returned, as `dbus_bus_register` would.
func libdbus_bus_set_unique_name(_ connection: RawConnection, _ name: String) -> Bool {
    name.withCString { dbus_bus_set_unique_name(connection, $0) != 0 }
}

/// `dbus_connection_set_exit_on_disconnect`
func libdbus_connection_set_exit_on_disconnect(_ connection: RawConnection, _ exit: Bool) {
    dbus_connection_set_exit_on_disconnect(connection, exit ? 1 : 0)
}

/// `dbus_connection_get_is_connected`
func libdbus_connection_get_is_connected(_ connection: RawConnection) -> Bool {
    dbus_connection_get_is_connected(connection) != 0
}

/// `dbus_connection_close`
func libdbus_connection_close(_ connection: RawConnection) {
    dbus_connection_close(connection)
}

/// `dbus_connection_unref`
func libdbus_connection_unref(_ connection: RawConnection) {
    dbus_connection_unref(connection)
}

/// `dbus_connection_set_watch_functions`
func libdbus_connection_set_watch_functions(
    _ connection: RawConnection,
    add: DBusAddWatchFunction?, remove: DBusRemoveWatchFunction?, toggled: DBusWatchToggledFunction?,
    data: UnsafeMutableRawPointer?, free: DBusFreeFunction?
) -> Bool {
    dbus_connection_set_watch_functions(connection, add, remove, toggled, data, free) != 0
}

/// `dbus_connection_set_timeout_functions`
func libdbus_connection_set_timeout_functions(
    _ connection: RawConnection,
    add: DBusAddTimeoutFunction?, remove: DBusRemoveTimeoutFunction?, toggled: DBusTimeoutToggledFunction?,
    data: UnsafeMutableRawPointer?, free: DBusFreeFunction?
) -> Bool {
    dbus_connection_set_timeout_functions(connection, add, remove, toggled, data, free) != 0
}

/// `dbus_connection_set_dispatch_status_function`
func libdbus_connection_set_dispatch_status_function(
    _ connection: RawConnection, _ function: DBusDispatchStatusFunction?,
    data: UnsafeMutableRawPointer?, free: DBusFreeFunction?
) {
    dbus_connection_set_dispatch_status_function(connection, function, data, free)
}

/// `dbus_connection_get_dispatch_status` == `DBUS_DISPATCH_DATA_REMAINS`
func libdbus_connection_has_data_remaining(_ connection: RawConnection) -> Bool {
    dbus_connection_get_dispatch_status(connection) == DBUS_DISPATCH_DATA_REMAINS
}

/// `dbus_connection_dispatch`; true while more messages remain to be dispatched.
func libdbus_connection_dispatch(_ connection: RawConnection) -> Bool {
    dbus_connection_dispatch(connection) == DBUS_DISPATCH_DATA_REMAINS
}

/// `dbus_connection_add_filter`
func libdbus_connection_add_filter(
    _ connection: RawConnection, _ function: DBusHandleMessageFunction?,
    data: UnsafeMutableRawPointer?, free: DBusFreeFunction?
) -> Bool {
    dbus_connection_add_filter(connection, function, data, free) != 0
}

/// `dbus_connection_can_send_type`: whether the transport negotiated `type` (only `CDBUS_TYPE_UNIX_FD` can be
/// missing: a `tcp:` transport, or a peer that did not agree to pass descriptors during authentication).
func libdbus_connection_can_send_type(_ connection: RawConnection, _ type: Int32) -> Bool {
    dbus_connection_can_send_type(connection, type) != 0
}

/// `dbus_connection_send`; false when libdbus ran out of memory.
func libdbus_connection_send(_ connection: RawConnection, _ message: RawMessage) -> Bool {
    dbus_connection_send(connection, message, nil) != 0
}

/// `dbus_connection_send`, returning the serial the message was given (its reply's reply serial); nil when
/// libdbus ran out of memory.
func libdbus_connection_send_returning_serial(_ connection: RawConnection, _ message: RawMessage) -> UInt32? {
    var serial: UInt32 = 0
    return dbus_connection_send(connection, message, &serial) != 0 ? serial : nil
}

// MARK: - Watches and timeouts

/// `dbus_watch_get_unix_fd`
func libdbus_watch_get_unix_fd(_ watch: RawWatch) -> Int32 {
    dbus_watch_get_unix_fd(watch)
}

/// `dbus_watch_get_flags` → (readable, writable)
func libdbus_watch_get_flags(_ watch: RawWatch) -> (readable: Bool, writable: Bool) {
    let flags = dbus_watch_get_flags(watch)
    return (flags & DBUS_WATCH_READABLE.rawValue != 0, flags & DBUS_WATCH_WRITABLE.rawValue != 0)
}

/// `dbus_watch_get_enabled`
func libdbus_watch_get_enabled(_ watch: RawWatch) -> Bool {
    dbus_watch_get_enabled(watch) != 0
}

/// `dbus_watch_handle` with the conditions that occurred (`DBUS_WATCH_READABLE`, `_WRITABLE`, `_HANGUP`, `_ERROR`).
func libdbus_watch_handle(_ watch: RawWatch, readable: Bool, writable: Bool, hangup: Bool, error: Bool) {
    var flags: UInt32 = 0
    if readable { flags |= DBUS_WATCH_READABLE.rawValue }
    if writable { flags |= DBUS_WATCH_WRITABLE.rawValue }
    if hangup { flags |= DBUS_WATCH_HANGUP.rawValue }
    if error { flags |= DBUS_WATCH_ERROR.rawValue }
    _ = dbus_watch_handle(watch, flags)
}

/// `dbus_timeout_get_interval` (milliseconds)
func libdbus_timeout_get_interval(_ timeout: RawTimeout) -> Int32 {
    dbus_timeout_get_interval(timeout)
}

/// `dbus_timeout_get_enabled`
func libdbus_timeout_get_enabled(_ timeout: RawTimeout) -> Bool {
    dbus_timeout_get_enabled(timeout) != 0
}

/// `dbus_timeout_handle`
func libdbus_timeout_handle(_ timeout: RawTimeout) {
    _ = dbus_timeout_handle(timeout)
}

// MARK: - Messages

/// `dbus_message_new_method_call`; every non-nil argument must have been validated.
func libdbus_message_new_method_call(
    destination: String?, path: String, interface: String?, member: String
) -> RawMessage? {
    withOptionalCString(destination) { destination in
        withOptionalCString(interface) { interface in
            path.withCString { path in
                member.withCString { member in dbus_message_new_method_call(destination, path, interface, member) }
            }
        }
    }
}

/// `dbus_message_new_signal`; every argument must have been validated.
func libdbus_message_new_signal(path: String, interface: String, member: String) -> RawMessage? {
    path.withCString { path in
        interface.withCString { interface in
            member.withCString { member in dbus_message_new_signal(path, interface, member) }
        }
    }
}

/// `dbus_message_new_method_return`
func libdbus_message_new_method_return(_ call: RawMessage) -> RawMessage? {
    dbus_message_new_method_return(call)
}

/// `dbus_message_new_error`; the name must have been validated.
func libdbus_message_new_error(_ call: RawMessage, name: String, text: String) -> RawMessage? {
    name.withCString { name in text.withCString { text in dbus_message_new_error(call, name, text) } }
}

/// `dbus_message_marshal`: the message's wire bytes (for the decoding fuzzer). A message that was never sent
/// has serial 0, which the wire format forbids: it gets serial 1 first.
func libdbus_message_marshal(_ message: RawMessage) -> [UInt8]? {
    if dbus_message_get_serial(message) == 0 { dbus_message_set_serial(message, 1) }
    var buffer: UnsafeMutablePointer<CChar>?
    var length: Int32 = 0
    guard dbus_message_marshal(message, &buffer, &length) != 0, let buffer else { return nil }
    defer { dbus_free(buffer) }
    return Array(UnsafeRawBufferPointer(start: buffer, count: Int(length)))
}

/// `dbus_message_demarshal`: a message from wire bytes, or the reason libdbus refuses them.
func libdbus_message_demarshal(_ bytes: [UInt8]) -> (RawMessage?, LibDBusFailure?) {
    bytes.withUnsafeBytes { raw in
        withCError { error in
            raw.baseAddress.flatMap { base in
                dbus_message_demarshal(base.assumingMemoryBound(to: CChar.self), Int32(raw.count), error)
            }
        }
    }
}

/// `dbus_message_ref`
func libdbus_message_ref(_ message: RawMessage) {
    _ = dbus_message_ref(message)
}

/// `dbus_message_unref`
func libdbus_message_unref(_ message: RawMessage) {
    dbus_message_unref(message)
}

/// `dbus_message_get_type` (a `DBUS_MESSAGE_TYPE_*`)
func libdbus_message_get_type(_ message: RawMessage) -> Int32 {
    dbus_message_get_type(message)
}

/// `dbus_message_get_reply_serial` (0 for a message that answers nothing)
func libdbus_message_get_reply_serial(_ message: RawMessage) -> UInt32 {
    dbus_message_get_reply_serial(message)
}

/// `dbus_message_get_sender`
func libdbus_message_get_sender(_ message: RawMessage) -> String? {
    optionalString(dbus_message_get_sender(message))
}

/// `dbus_message_get_destination`
func libdbus_message_get_destination(_ message: RawMessage) -> String? {
    optionalString(dbus_message_get_destination(message))
}

/// `dbus_message_get_path`
func libdbus_message_get_path(_ message: RawMessage) -> String? {
    optionalString(dbus_message_get_path(message))
}

/// `dbus_message_get_interface`
func libdbus_message_get_interface(_ message: RawMessage) -> String? {
    optionalString(dbus_message_get_interface(message))
}

/// `dbus_message_get_member`
func libdbus_message_get_member(_ message: RawMessage) -> String? {
    optionalString(dbus_message_get_member(message))
}

/// `dbus_message_get_error_name`
func libdbus_message_get_error_name(_ message: RawMessage) -> String? {
    optionalString(dbus_message_get_error_name(message))
}

/// `dbus_message_get_signature` (never NULL; "" for no arguments)
func libdbus_message_get_signature(_ message: RawMessage) -> String {
    optionalString(dbus_message_get_signature(message)) ?? ""
}

/// `dbus_message_has_signature`, without building a Swift string for the message's signature.
func libdbus_message_has_signature(_ message: RawMessage, _ signature: String) -> Bool {
    signature.withCString { dbus_message_has_signature(message, $0) != 0 }
}

/// `dbus_message_is_signal`
func libdbus_message_is_signal(_ message: RawMessage, interface: String, member: String) -> Bool {
    interface.withCString { interface in member.withCString { dbus_message_is_signal(message, interface, $0) != 0 } }
}

/// `dbus_message_contains_unix_fds`
func libdbus_message_contains_unix_fds(_ message: RawMessage) -> Bool {
    dbus_message_contains_unix_fds(message) != 0
}

/// `dbus_message_get_no_reply`
func libdbus_message_get_no_reply(_ message: RawMessage) -> Bool {
    dbus_message_get_no_reply(message) != 0
}

/// `dbus_message_set_no_reply`
func libdbus_message_set_no_reply(_ message: RawMessage, _ noReply: Bool) {
    dbus_message_set_no_reply(message, noReply ? 1 : 0)
}

/// `dbus_message_set_destination`; the name must have been validated.
func libdbus_message_set_destination(_ message: RawMessage, _ destination: String) -> Bool {
    destination.withCString { dbus_message_set_destination(message, $0) != 0 }
}

// MARK: - Reading arguments

/// `dbus_message_iter_init`; false when the message has no arguments.
func libdbus_message_iter_init(_ message: RawMessage, _ iterator: inout MessageIterator) -> Bool {
    dbus_message_iter_init(message, &iterator) != 0
}

/// `dbus_message_iter_get_arg_type` (a type code, `CDBUS_TYPE_INVALID` at the end)
func libdbus_message_iter_get_arg_type(_ iterator: inout MessageIterator) -> Int32 {
    dbus_message_iter_get_arg_type(&iterator)
}

/// `dbus_message_iter_get_element_type`
func libdbus_message_iter_get_element_type(_ iterator: inout MessageIterator) -> Int32 {
    dbus_message_iter_get_element_type(&iterator)
}

/// `dbus_message_iter_next`
func libdbus_message_iter_next(_ iterator: inout MessageIterator) -> Bool {
    dbus_message_iter_next(&iterator) != 0
}

/// `dbus_message_iter_recurse`
func libdbus_message_iter_recurse(_ iterator: inout MessageIterator, _ sub: inout MessageIterator) {
    dbus_message_iter_recurse(&iterator, &sub)
}

/// `dbus_message_iter_get_basic` into libdbus's `DBusBasicValue` union.
func libdbus_message_iter_get_basic(_ iterator: inout MessageIterator) -> DBusBasicValue {
    var value = DBusBasicValue()
    dbus_message_iter_get_basic(&iterator, &value)
    return value
}

/// `dbus_message_iter_get_basic` on a `CDBUS_TYPE_UNIX_FD`: libdbus duplicates the message's descriptor
/// (close-on-exec) and the caller owns the *new* descriptor it returns; -1 when that `dup` failed or the message
/// names a descriptor it does not carry.
func libdbus_message_iter_get_unix_fd(_ iterator: inout MessageIterator) -> Int32 {
    var descriptor: Int32 = -1
    dbus_message_iter_get_basic(&iterator, &descriptor)
    return descriptor
}

/// `dbus_message_iter_get_basic` for the string-like types, copied into a Swift string.
func libdbus_message_iter_get_string(_ iterator: inout MessageIterator) -> String {
    var value = DBusBasicValue()
    dbus_message_iter_get_basic(&iterator, &value)
    return value.str.map { String(cString: $0) } ?? ""
}

/// `dbus_message_iter_get_fixed_array` for an array of bytes, copied out in one go.
func libdbus_message_iter_get_byte_array(_ arrayIterator: inout MessageIterator) -> [UInt8] {
    var sub = MessageIterator()
    dbus_message_iter_recurse(&arrayIterator, &sub)
    var base: UnsafeRawPointer?
    var count: Int32 = 0
    dbus_message_iter_get_fixed_array(&sub, &base, &count)
    guard let base, count > 0 else { return [] }
    return [UInt8](UnsafeRawBufferPointer(start: base, count: Int(count)))
}

/// `dbus_message_iter_get_signature` (the signature of the current value), freed with `dbus_free`.
func libdbus_message_iter_get_signature(_ iterator: inout MessageIterator) -> String {
    guard let pointer = dbus_message_iter_get_signature(&iterator) else { return "" }
    defer { dbus_free(pointer) }
    return String(cString: pointer)
}

// MARK: - Writing arguments (each returns false only when libdbus ran out of memory)

/// `dbus_message_iter_init_append`
func libdbus_message_iter_init_append(_ message: RawMessage, _ iterator: inout MessageIterator) {
    dbus_message_iter_init_append(message, &iterator)
}

/// `dbus_message_iter_append_basic` for the fixed-size types.
func libdbus_message_iter_append_basic<T>(_ iterator: inout MessageIterator, _ type: Int32, _ value: T) -> Bool {
    var value = value
    return withUnsafePointer(to: &value) { dbus_message_iter_append_basic(&iterator, type, $0) != 0 }
}

/// `dbus_message_iter_append_basic` for strings, object paths and signatures (already checked: no NUL byte).
func libdbus_message_iter_append_string(_ iterator: inout MessageIterator, _ type: Int32, _ string: String) -> Bool {
    string.withCString { pointer in
        var pointer = pointer
        return dbus_message_iter_append_basic(&iterator, type, &pointer) != 0
    }
}

/// `dbus_message_iter_append_basic` for a `CDBUS_TYPE_UNIX_FD`: libdbus appends a duplicate of `descriptor`
/// (close-on-exec) that the message owns, so the caller keeps its own. False when that `dup` failed or libdbus
/// ran out of memory.
func libdbus_message_iter_append_unix_fd(_ iterator: inout MessageIterator, _ descriptor: Int32) -> Bool {
    var descriptor = descriptor
    return dbus_message_iter_append_basic(&iterator, CDBUS_TYPE_UNIX_FD, &descriptor) != 0
}

/// `dbus_message_iter_append_fixed_array` for bytes, inside an already opened `ay` container.
func libdbus_message_iter_append_bytes(_ arrayIterator: inout MessageIterator, _ bytes: [UInt8]) -> Bool {
    bytes.withUnsafeBufferPointer { buffer in
        var base = buffer.baseAddress
        return dbus_message_iter_append_fixed_array(&arrayIterator, CDBUS_TYPE_BYTE, &base, Int32(buffer.count)) != 0
    }
}

/// `dbus_message_iter_open_container`; `signature` is the contained signature for arrays and variants.
func libdbus_message_iter_open_container(
    _ iterator: inout MessageIterator, _ type: Int32, _ signature: String?, _ sub: inout MessageIterator
) -> Bool {
    withOptionalCString(signature) { dbus_message_iter_open_container(&iterator, type, $0, &sub) != 0 }
}

/// `dbus_message_iter_close_container`
func libdbus_message_iter_close_container(_ iterator: inout MessageIterator, _ sub: inout MessageIterator) -> Bool {
    dbus_message_iter_close_container(&iterator, &sub) != 0
}

/// `dbus_message_iter_abandon_container_if_open`, to unwind after an out-of-memory failure.
func libdbus_message_iter_abandon_container_if_open(_ iterator: inout MessageIterator, _ sub: inout MessageIterator) {
    dbus_message_iter_abandon_container_if_open(&iterator, &sub)
}

// MARK: - Unix (not libdbus: the two calls `UnixFileDescriptor` makes, kept with the others)

/// `fcntl(descriptor, F_DUPFD_CLOEXEC, 0)`: a new descriptor for the same open file, or the `errno` of failure.
func system_fcntl_dupfd_cloexec(_ descriptor: Int32) -> Result<Int32, SystemErrno> {
    let duplicate = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
    return duplicate >= 0 ? .success(duplicate) : .failure(SystemErrno(errno))
}

/// `close(descriptor)`. Not retried on EINTR: on Linux the descriptor is released even then, and a retry could
/// close a descriptor another thread has just been given.
func system_close(_ descriptor: Int32) {
    _ = close(descriptor)
}

/// An `errno` value with its `strerror` text.
struct SystemErrno: Error, Sendable, CustomStringConvertible {
    let code: Int32

    init(_ code: Int32) {
        self.code = code
    }

    static var current: SystemErrno { SystemErrno(errno) }

    var isBadDescriptor: Bool { code == EBADF }

    var description: String { "\(String(cString: strerror(code))) (errno \(code))" }
}
