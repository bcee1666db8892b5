import CDBus

// Method calls: a libdbus pending call per call, completed through `dbus_pending_call_set_notify`, with its
// timeout run by the main loop's timer and Task cancellation mapped to `dbus_pending_call_cancel`.

extension DBusConnection {
    /// Calls a method and returns the reply's arguments.
    ///
    /// - Throws: `DBusError` — `.remote` with the peer's error `name` and `message` (e.g.
    ///   `org.bluez.Error.Failed`, "le-connection-abort-by-local"); `.timeout` (name
    ///   `org.freedesktop.DBus.Error.NoReply`) after `timeout`; `.disconnected` when the bus goes away;
    ///   `.invalidArgument` for invalid names or values, a closed `UnixFileDescriptor` among them (nothing is
    ///   sent); `.unsupportedType` for Unix file descriptors on a transport that cannot pass them (`tcp:`).
    ///   `CancellationError` when the task is cancelled: the pending call is cancelled and its reply, if any,
    ///   ignored. Unix file descriptors in the reply come out as `UnixFileDescriptor`s the caller owns.
    ///
    /// `nonisolated(nonsending)` on purpose: the message is built on the caller's executor and the caller
    /// resumes there from the reply notification. A caller isolated to this connection (a function with an
    /// `isolated DBusConnection` parameter, or an actor sharing its executor) makes no thread hop at all.
    nonisolated(nonsending) public func call(
        destination: String?, path: ObjectPath, interface: String?, method: String,
        arguments: [DBusValue] = [], timeout: Duration = .seconds(25)
    ) async throws -> [DBusValue] {
        let message = try DBusMessage.methodCall(
            destination: destination, path: path, interface: interface, member: method)
        try message.appendArguments(arguments)
        return try await sendWithReply(message, timeout: timeout).arguments()
    }

    /// Calls a method and checks the reply's signature, e.g. `expecting: "a{oa{sa{sv}}}"`.
    nonisolated(nonsending) public func call(
        destination: String?, path: ObjectPath, interface: String?, method: String,
        arguments: [DBusValue] = [], expecting signature: DBusSignature, timeout: Duration = .seconds(25)
    ) async throws -> [DBusValue] {
        let reply = try await call(
            destination: destination, path: path, interface: interface, method: method, arguments: arguments,
            timeout: timeout)
        try reply.expect(signature)
        return reply
    }

    /// Sends `message` and waits for its method return (an error reply throws).
    nonisolated(nonsending) func sendWithReply(_ message: DBusMessage, timeout: Duration) async throws -> DBusMessage {
        let box = ReplyBox()
        let milliseconds = Self.milliseconds(timeout)
        let handoff = Handoff<DBusMessage>()
        await withTaskCancellationHandler {
            await withUnsafeContinuation { continuation in
                let waiter = ReplyBox.Waiter.continuation(continuation, handoff)
                if executor.isCurrent {
                    // A caller isolated to this connection, or preferring its executor, is already on its
                    // thread: send without a hop.
                    self.onThread { $0.startCall(message, milliseconds, box, waiter) }
                } else {
                    executor.async {
                        self.onThread { $0.startCall(message, milliseconds, box, waiter) }
                    }
                }
            }
        } onCancel: {
            executor.async {
                self.onThread { $0.cancelCall(box) }
            }
        }
        return try handoff.take()
    }

    /// Sends `message` now and calls `completion` on the connection's executor with the reply, in the order
    /// messages arrive (used where a reply must be seen in order with signals, e.g. GetNameOwner).
    func sendWithReply(
        _ message: DBusMessage, timeout: Duration = .seconds(25),
        completion: @escaping @Sendable (isolated DBusConnection, Result<DBusMessage, any Error>) -> Void
    ) {
        startCall(message, Self.milliseconds(timeout), ReplyBox(), .callback(completion))
    }

    static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 0 }
        let milliseconds = seconds.multipliedReportingOverflow(by: 1000)
        guard !milliseconds.overflow, milliseconds.partialValue < Int64(Int32.max) else { return Int32.max }
        return Int32(clamping: milliseconds.partialValue + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }

    func startCall(_ message: DBusMessage, _ milliseconds: Int32, _ box: ReplyBox, _ waiter: ReplyBox.Waiter) {
        if box.isCancelled {
            waiter.resume(.failure(CancellationError()), on: self)
            return
        }
        do {
            try checkOpen()
            try checkCanSend(message)
        } catch {
            waiter.resume(.failure(error), on: self)
            return
        }
        let (sent, pointer) = libdbus_connection_send_with_reply(
            handle.pointer, message.pointer, timeoutMilliseconds: milliseconds)
        guard sent else {
            waiter.resume(.failure(DBusError.outOfMemory), on: self)
            return
        }
        guard let pointer else {
            waiter.resume(.failure(DBusError.disconnected("the bus connection was lost")), on: self)
            return
        }
        let pendingCall = PendingCall(adopting: pointer)
        box.pendingCall = pendingCall
        box.waiter = waiter
        box.connection = self
        replies[ObjectIdentifier(box)] = box
        // The notification holds its own reference to the box, released by libdbus with the pending call.
        let context = Unmanaged.passRetained(box).toOpaque()
        guard libdbus_pending_call_set_notify(pointer, replyNotify, data: context, free: releaseReplyBox) else {
            Unmanaged<ReplyBox>.fromOpaque(context).release()
            replies[ObjectIdentifier(box)] = nil
            box.fail(DBusError.outOfMemory, on: self)
            return
        }
        // set_notify does not call back for a reply that has already arrived.
        if pendingCall.isCompleted { complete(box) }
    }

    /// The pending call of `box` completed: hand its reply (or the error it stands for) to the waiter.
    func complete(_ box: ReplyBox) {
        guard let waiter = box.waiter, let pendingCall = box.pendingCall else { return }
        box.waiter = nil
        box.pendingCall = nil
        box.connection = nil
        replies[ObjectIdentifier(box)] = nil
        guard let reply = pendingCall.stealReply() else {
            waiter.resume(.failure(DBusError.disconnected("the bus connection was lost")), on: self)
            return
        }
        waiter.resume(Self.result(of: reply, isConnected: handle.isConnected), on: self)
    }

    func cancelCall(_ box: ReplyBox) {
        box.isCancelled = true
        guard let waiter = box.waiter, let pendingCall = box.pendingCall else { return }
        box.waiter = nil
        box.pendingCall = nil
        box.connection = nil
        replies[ObjectIdentifier(box)] = nil
        pendingCall.cancel()
        waiter.resume(.failure(CancellationError()), on: self)
    }

    /// A method return as success; an error reply as `DBusError`. libdbus answers a call that timed out, or
    /// that was pending when the connection died, with a NoReply error of its own (it has no sender).
    static func result(of reply: DBusMessage, isConnected: Bool) -> Result<DBusMessage, any Error> {
        guard reply.kind == .error else { return .success(reply) }
        let name = reply.errorName ?? DBusError.StandardName.failed
        let text = (try? reply.arguments())?.first?.string ?? ""
        if name == DBusError.StandardName.noReply, reply.sender == nil {
            if !isConnected { return .failure(DBusError.disconnected("the bus connection was lost")) }
            return .failure(DBusError(code: .timeout, name: name, message: text))
        }
        return .failure(DBusError(name: name, message: text))
    }
}

/// One outstanding method call: what waits for it and the libdbus pending call.
final class ReplyBox: @unchecked Sendable {
    // @unchecked Sendable: created on the caller's thread, then read and written only on the connection's
    // thread (every access is inside an isolated method of `DBusConnection`).

    enum Waiter: Sendable {
        case continuation(UnsafeContinuation<Void, Never>, Handoff<DBusMessage>)
        case callback(@Sendable (isolated DBusConnection, Result<DBusMessage, any Error>) -> Void)

        func resume(_ result: Result<DBusMessage, any Error>, on connection: isolated DBusConnection) {
            switch self {
            case .continuation(let continuation, let handoff):
                handoff.put(result)
                continuation.resume()
            case .callback(let callback): callback(connection, result)
            }
        }
    }

    var waiter: Waiter?
    var pendingCall: PendingCall?
    var isCancelled = false
    /// Set while the call is outstanding so that the C notification can find its way back; cleared when done.
    var connection: DBusConnection?

    /// Fails the call without a reply, cancelling the libdbus pending call.
    func fail(_ error: any Error, on connection: isolated DBusConnection) {
        guard let waiter else { return }
        self.waiter = nil
        self.connection = nil
        pendingCall?.cancel()
        pendingCall = nil
        waiter.resume(.failure(error), on: connection)
    }
}

private let replyNotify: DBusPendingCallNotifyFunction = { _, context in
    let box = Unmanaged<ReplyBox>.fromOpaque(context!).takeUnretainedValue()
    guard let connection = box.connection else { return }
    connection.onThread { $0.complete(box) }
}

private let releaseReplyBox: DBusFreeFunction = { context in
    Unmanaged<ReplyBox>.fromOpaque(context!).release()
}
