import CDBus

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A private connection to a D-Bus message bus: method calls, signals, properties and exported objects.
///
/// The connection is an actor whose executor is a thread of its own (`ConnectionThread`) that also runs
/// libdbus's I/O (an `epoll` wait on the socket, with the earliest call's deadline as its timeout) and its
/// message filter, which hands replies to their calls, so that libdbus is only ever entered from that thread.
/// Each connection is private (`dbus_connection_open_private`), never libdbus's shared one.
///
/// ```swift
/// let bus = try await DBusConnection(bus: .system)      // honours DBUS_SYSTEM_BUS_ADDRESS
/// let reply = try await bus.call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
///                                interface: "org.freedesktop.DBus", method: "GetNameOwner",
///                                arguments: [.string("org.bluez")])
/// let owner = try reply.decode(String.self)
/// await bus.close()
/// ```
///
/// When the bus goes away, every pending call fails at once with `DBusError.Code.disconnected`, every signal
/// stream ends with that error, and later calls fail immediately.
public actor DBusConnection {
    /// Which bus to connect to.
    public enum Bus: Sendable, Hashable {
        /// The system bus: `DBUS_SYSTEM_BUS_ADDRESS`, or `unix:path=/var/run/dbus/system_bus_socket`.
        case system
        /// The session bus: `DBUS_SESSION_BUS_ADDRESS` (there is no autolaunch).
        case session
        /// A bus at a D-Bus address such as `unix:path=/tmp/bus` or `tcp:host=127.0.0.1,port=7000`.
        case address(String)
    }

    /// The life of a connection: open until the bus goes away (`disconnected`) or `close()` (`closed`).
    public enum State: Sendable, Hashable {
        case open, disconnected, closed
    }

    nonisolated let executor: ConnectionThread
    /// The thread's task-executor face, held so that every task preferring it sees one object.
    nonisolated let taskRole: ConnectionThread.TaskRole
    nonisolated let handle: ConnectionHandle
    nonisolated let mainLoop: MainLoop
    /// The unique name the bus gave this connection (`:1.42`).
    public nonisolated let uniqueName: String
    /// The address connected to, for error messages.
    nonisolated let address: String

    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        executor.asUnownedSerialExecutor()
    }

    /// The connection's thread as a task executor. Work that makes many calls on this connection runs cheapest
    /// inside `withTaskExecutorPreference(connection.taskExecutor) { … }` (or a task started with it): each call
    /// is sent and its reply resumes the task on the thread that reads the socket — no thread switch per call.
    /// Keep such work short and never block in it: it shares the thread with every reply and signal of the
    /// connection.
    public nonisolated var taskExecutor: any TaskExecutor {
        taskRole
    }

    /// Whether the connection is still usable.
    public internal(set) var state: State = .open

    /// The method calls sent and not yet answered.
    var replies = OutstandingCalls()
    /// The last call timeout and its nanoseconds (see `timeoutNanoseconds(_:)`).
    var lastTimeout: (timeout: Duration, nanoseconds: Int64?)?
    var subscriptions: [UInt64: SignalSubscription] = [:]
    var nextSubscriptionID: UInt64 = 1
    var ownerTrackers: [String: OwnerTracker] = [:]
    var exportedObjects: [ObjectPath: ExportedObject] = [:]
    var objectManagers: Set<ObjectPath> = []
    var statistics = Statistics()

    /// Counters for diagnostics and tests.
    struct Statistics {
        var signalsReceived = 0
        var methodCallsReceived = 0
        var callsSent = 0
    }

    /// Connects to `bus` and registers (`Hello`) within `timeout`. Throws `DBusError.Code.connectFailed`, also
    /// when the bus accepts the connection but does not answer in time.
    public init(bus: Bus, timeout: Duration = .seconds(10)) async throws {
        let address = try bus.resolvedAddress()
        let executor = try ConnectionThread(name: "dbus")
        // Opening blocks (authentication, Hello): do it on the connection's own thread, not the cooperative pool.
        let handoff = Handoff<(ConnectionHandle, uniqueName: String)>()
        await withCheckedContinuation { continuation in
            executor.async {
                handoff.put(Result { try ConnectionHandle.open(address: address, timeout: timeout) })
                continuation.resume()
            }
        }
        let handle: ConnectionHandle
        let uniqueName: String
        do {
            (handle, uniqueName) = try handoff.take()
        } catch {
            executor.stop()
            throw error
        }
        self.executor = executor
        self.taskRole = executor.taskExecutor
        self.handle = handle
        self.uniqueName = uniqueName
        self.address = address
        self.mainLoop = MainLoop(connection: handle.pointer, thread: executor)
        // Fully initialised: from here on the initialiser runs on the connection's executor.
        installFilter()
        mainLoop.start()
        executor.setDeadlineHandler(for: .calls) { [weak self] in self?.onThread { $0.expireCalls() } }
    }

    deinit {
        let handle = handle
        let mainLoop = mainLoop
        // The last reference may go on any thread; the watches and libdbus are torn down on the connection's
        // thread, which then ends.
        executor.async {
            mainLoop.stop()
            handle.close()
        }
        executor.stop()
        let error = DBusError.disconnected("the connection was released")
        for subscription in subscriptions.values { subscription.finish(error) }
    }

    /// Closes the connection: pending calls fail and signal streams end with `DBusError.Code.disconnected`.
    public func close() {
        guard state != .closed else { return }
        state = .closed
        failEverything(DBusError.disconnected("the connection was closed"))
        mainLoop.stop()
        handle.close()
        // The thread ends when its queue is empty; later calls (failing "closed") start it again for a moment.
        executor.stop()
    }

    /// `assumeIsolated` for code on the connection's thread (libdbus callbacks, blocks queued with `async`),
    /// without the runtime's generic checks, which also ask on every call whether this is the main actor's
    /// executor (a measurable share of a method call's CPU: Benchmarks/NOTES.md). The precondition keeps it honest.
    nonisolated func onThread<T>(_ body: (isolated DBusConnection) -> T) -> T {
        precondition(executor.isCurrent, "not on the D-Bus connection's thread")
        return withoutActuallyEscaping(body) { body in
            // What `assumeIsolated` does once its check has passed.
            unsafeBitCast(body, to: ((DBusConnection) -> T).self)(self)
        }
    }

    /// `handleIncoming` from the message filter, the way ``onThread(_:)`` would, but through a function that
    /// captures nothing and is not generic: every message takes this path, and a generic one costs a closure
    /// context and a run-time escape check per message (measured).
    nonisolated func handleIncomingOnThread(_ message: DBusMessage) -> Bool {
        precondition(executor.isCurrent, "not on the D-Bus connection's thread")
        let body: (isolated DBusConnection, DBusMessage) -> Bool = { $0.handleIncoming($1) }
        return unsafeBitCast(body, to: ((DBusConnection, DBusMessage) -> Bool).self)(self, message)
    }

    /// Throws `DBusError.Code.disconnected` unless the connection is open.
    func checkOpen() throws {
        switch state {
        case .open: return
        case .disconnected: throw DBusError.disconnected("the bus connection was lost")
        case .closed: throw DBusError.disconnected("the connection was closed")
        }
    }

    func failEverything(_ error: DBusError) {
        failCalls(error)
        let ended = subscriptions.values
        subscriptions.removeAll()
        ownerTrackers.removeAll()
        for subscription in ended { subscription.finish(error) }
    }

    // MARK: Incoming messages

    private func installFilter() {
        let context = FilterContext(connection: self)
        _ = libdbus_connection_add_filter(
            handle.pointer,
            { _, message, context in
                let box = Unmanaged<FilterContext>.fromOpaque(context!).takeUnretainedValue()
                guard let message, let connection = box.connection else {
                    return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
                }
                let incoming = DBusMessage(retaining: message)
                let handled = connection.handleIncomingOnThread(incoming)
                return handled ? DBUS_HANDLER_RESULT_HANDLED : DBUS_HANDLER_RESULT_NOT_YET_HANDLED
            },
            data: Unmanaged.passRetained(context).toOpaque(),
            free: { Unmanaged<FilterContext>.fromOpaque($0!).release() })
    }

    /// Called by the filter, on the connection's thread, for every message.
    func handleIncoming(_ message: DBusMessage) -> Bool {
        switch message.kind {
        case .signal:
            if message.isLocalDisconnected {
                handleDisconnected()
            } else {
                deliverSignal(message)
            }
            return true
        case .methodCall:
            handleMethodCall(message)
            return true
        case .methodReturn, .error:
            return complete(message)
        case .other:
            return false
        }
    }

    private func handleDisconnected() {
        guard state == .open else { return }
        state = .disconnected
        failEverything(DBusError.disconnected("the bus connection was lost"))
        mainLoop.stop()
        handle.close()
        executor.stop()
    }

    // MARK: Sending

    /// Throws `DBusError.Code.unsupportedType` when `message` carries Unix file descriptors and this connection's
    /// transport cannot pass them (`dbus_connection_can_send_type`): libdbus would otherwise fail the send later,
    /// or drop the connection.
    func checkCanSend(_ message: DBusMessage) throws {
        guard message.containsUnixFileDescriptors,
            !libdbus_connection_can_send_type(handle.pointer, CDBUS_TYPE_UNIX_FD)
        else { return }
        throw DBusError(
            code: .unsupportedType,
            message: "the connection to \(address) cannot pass Unix file descriptors (type 'h'): only a unix: "
                + "socket transport that negotiated them can (not tcp:); nothing was sent")
    }

    /// Sends a message now, in order with everything else this connection sends.
    func sendNow(_ message: DBusMessage) throws {
        try checkOpen()
        try checkCanSend(message)
        guard libdbus_connection_send(handle.pointer, message.pointer) else { throw DBusError.outOfMemory }
    }

    /// Sends a method call without waiting for (or wanting) a reply.
    public func send(
        destination: String?, path: ObjectPath, interface: String?, method: String, arguments: [DBusValue] = []
    ) throws {
        let message = try DBusMessage.methodCall(
            destination: destination, path: path, interface: interface, member: method)
        try message.appendArguments(arguments)
        message.setNoReply()
        try sendNow(message)
    }

    /// Emits a signal from `path`; with a `destination` it is unicast. Signals and replies sent through this
    /// connection leave in the order they were sent, so a handler that emits and then returns has its signal
    /// delivered before its reply.
    public func emitSignal(
        path: ObjectPath, interface: String, member: String, arguments: [DBusValue] = [],
        destination: String? = nil
    ) throws {
        let message = try DBusMessage.signal(path: path, interface: interface, member: member, destination: destination)
        try message.appendArguments(arguments)
        try sendNow(message)
    }
}

extension DBusConnection.Bus {
    func resolvedAddress() throws -> String {
        switch self {
        case .system:
            return getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) }
                ?? "unix:path=/var/run/dbus/system_bus_socket"
        case .session:
            guard let address = getenv("DBUS_SESSION_BUS_ADDRESS") else {
                throw DBusError(code: .connectFailed, message: "DBUS_SESSION_BUS_ADDRESS is not set")
            }
            return String(cString: address)
        case .address(let address):
            return address
        }
    }
}

/// The filter's context: a weak reference, so that libdbus holding it does not keep the connection alive.
final class FilterContext: @unchecked Sendable {
    // @unchecked Sendable: `connection` is assigned once, before libdbus can call the filter; weak loads are
    // atomic.
    weak var connection: DBusConnection?

    init(connection: DBusConnection) {
        self.connection = connection
    }
}
