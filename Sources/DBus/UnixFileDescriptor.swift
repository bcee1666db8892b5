import Basics

/// The owner of one Unix file descriptor that travels in D-Bus messages as type `h`.
///
/// It closes its descriptor exactly once: on `close()` (idempotent, safe from any thread) or when its last
/// reference goes. A received `h` is always a descriptor of its own: libdbus duplicates it out of the message,
/// and the `DBusValue.unixFileDescriptor` that holds it owns it, also when the rest of the message fails to
/// decode. Sending does not give a descriptor away: the message carries a duplicate, and this one stays open
/// until you close it. Equality and hashing are by identity: two owners of the same open file are not equal.
///
/// Holding a logind sleep inhibitor (the lock lasts as long as the descriptor is open):
///
/// ```swift
/// let bus = try await DBusConnection(bus: .system)
/// let reply = try await bus.call(
///     destination: "org.freedesktop.login1", path: "/org/freedesktop/login1",
///     interface: "org.freedesktop.login1.Manager", method: "Inhibit",
///     arguments: [.string("sleep"), .string("keepalive"), .string("finish the poll window"), .string("delay")],
///     expecting: "h")
/// let inhibitor = try reply.decode(UnixFileDescriptor.self)
/// // … logind delays suspending (up to InhibitDelayMaxSec) while `inhibitor` is open …
/// inhibitor.close()          // releases the lock; dropping the last reference would too
/// ```
///
/// Sending one (e.g. an exported method returning the read end of a pipe):
///
/// ```swift
/// DBusMethod("Open", out: "h") { _ in [.unixFileDescriptor(try UnixFileDescriptor(duplicating: readEnd))] }
/// ```
///
/// Copies of a `DBusValue` share the descriptor object rather than the file: closing it through one copy closes
/// it for all (a signal delivered to several subscribers hands each the same object).
public final class UnixFileDescriptor: Sendable, Hashable, CustomStringConvertible {
    /// The descriptor; nil once closed. Users of the raw value hold the lock, so `close()` waits for them.
    private let descriptor: Locked<Int32?>

    /// Owns a duplicate of `fd` (`fcntl(fd, F_DUPFD_CLOEXEC, 0)`); `fd` itself stays the caller's.
    ///
    /// - Throws: `DBusError.Code.invalidArgument` when `fd` is not an open descriptor (EBADF);
    ///   `DBusError.Code.systemCall` when it cannot be duplicated (e.g. EMFILE).
    public init(duplicating fd: Int32) throws {
        switch system_fcntl_dupfd_cloexec(fd) {
        case .success(let duplicate):
            descriptor = Locked(duplicate)
        case .failure(let error) where error.isBadDescriptor:
            throw DBusError.invalidArgument("\(fd) is not an open file descriptor: \(error)")
        case .failure(let error):
            throw DBusError(code: .systemCall, message: "fcntl(\(fd), F_DUPFD_CLOEXEC) failed: \(error)")
        }
    }

    /// Takes over `fd`, which the caller owned (a descriptor libdbus duplicated out of a message).
    init(adopting fd: Int32) {
        precondition(fd >= 0, "a negative file descriptor cannot be owned")
        descriptor = Locked(fd)
    }

    deinit {
        close()
    }

    /// The descriptor number while open; nil after `close()`.
    ///
    /// Use it on a descriptor you keep open: once closed, the number may be reused by the process for another
    /// file at any time.
    public var rawValue: Int32? {
        descriptor.withLock { $0 }
    }

    /// Closes the descriptor. Later calls, and the deinitializer, do nothing.
    public func close() {
        let open = descriptor.withLock { descriptor in
            defer { descriptor = nil }
            return descriptor
        }
        if let open { system_close(open) }
    }

    /// Runs `body` with the raw descriptor (nil when closed) while `close()` waits. `body` must not close it.
    func withRawValue<Result>(_ body: (Int32?) throws -> Result) rethrows -> Result {
        try descriptor.withLock { try body($0) }
    }

    public static func == (lhs: UnixFileDescriptor, rhs: UnixFileDescriptor) -> Bool {
        lhs === rhs
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self))
    }

    public var description: String {
        rawValue.map { "UnixFileDescriptor(\($0))" } ?? "UnixFileDescriptor(closed)"
    }
}
