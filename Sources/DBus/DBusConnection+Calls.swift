import CDBus
import Synchronization

// Method calls: sent with `dbus_connection_send`, each waiting in `OutstandingCalls` for the reply the message
// filter finds by its reply serial, with its timeout a deadline on the connection's thread and Task cancellation
// dropping it (a reply that comes later is ignored). Why not libdbus's pending calls: see `OutstandingCalls`.

extension DBusConnection {
    /// Calls a method and returns the reply's arguments.
    ///
    /// - Throws: `DBusError` — `.remote` with the peer's error `name` and `message` (e.g.
    ///   `org.bluez.Error.Failed`, "le-connection-abort-by-local"); `.timeout` (name
    ///   `org.freedesktop.DBus.Error.NoReply`) after `timeout`; `.disconnected` when the bus goes away;
    ///   `.invalidArgument` for invalid names or values, a closed `UnixFileDescriptor` among them (nothing is
    ///   sent); `.unsupportedType` for Unix file descriptors on a transport that cannot pass them (`tcp:`).
    ///   `CancellationError` when the task is cancelled: the call stops waiting at once and its reply, if any
    ///   comes, is ignored. Unix file descriptors in the reply come out as `UnixFileDescriptor`s the caller owns.
    ///
    /// `nonisolated(nonsending)` on purpose: the message is built on the caller's executor and the caller
    /// resumes there from the reply notification. A caller isolated to this connection (a function with an
    /// `isolated DBusConnection` parameter, or an actor sharing its executor) makes no thread hop at all.
    ///
    /// `cancellation` ends the call from outside the task (``CallCancellation``), with `CancellationError` too.
    nonisolated(nonsending) public func call(
        destination: String?, path: ObjectPath, interface: String?, method: String,
        arguments: [DBusValue] = [], timeout: Duration = .seconds(25), cancellation: CallCancellation? = nil
    ) async throws -> [DBusValue] {
        let message = try DBusMessage.methodCall(
            destination: destination, path: path, interface: interface, member: method)
        try message.appendArguments(arguments)
        return try await sendWithReply(message, timeout: timeout, cancellation: cancellation).arguments()
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
    nonisolated(nonsending) func sendWithReply(
        _ message: DBusMessage, timeout: Duration, cancellation: CallCancellation? = nil
    ) async throws -> DBusMessage {
        // A local first: `#isolation != nil` inline in the condition crashes the compiler in debug builds
        // (Swift 6.3: "PHINode should have one entry for each predecessor").
        let isolation = #isolation
        if isolation != nil, executor.isCurrent {
            // A caller isolated to this connection (or to an actor on its executor) waits as a task preferring
            // its thread: otherwise the reply resumes the task on the global executor, which then hops back to
            // this thread (two thread wake-ups per call, which nearly doubled its CPU: Benchmarks/NOTES.md).
            return try await withTaskExecutorPreference(taskRole) {
                try await self.waitForReplyOnThread(message, timeout: timeout, cancellation: cancellation)
            }
        }
        return try await waitForReply(message, timeout: timeout, cancellation: cancellation)
    }

    /// `waitForReply` as a nonisolated function: under a preference for `taskRole` it runs on the connection's
    /// thread but outside the actor, so that the reply resumes it there directly.
    private nonisolated func waitForReplyOnThread(
        _ message: DBusMessage, timeout: Duration, cancellation: CallCancellation?
    ) async throws -> DBusMessage {
        try await waitForReply(message, timeout: timeout, cancellation: cancellation)
    }

    /// Sends `message` from wherever the caller runs and waits for its reply.
    private nonisolated(nonsending) func waitForReply(
        _ message: DBusMessage, timeout: Duration, cancellation: CallCancellation?
    ) async throws -> DBusMessage {
        let box = ReplyBox(message: message, timeout: timeout)
        // Cancelled already: not sent (`startCall` fails it). Set before the box reaches the connection's thread.
        if let cancellation, !cancellation.attach(box, on: self) { box.isCancelled = true }
        await withTaskCancellationHandler {
            await withUnsafeContinuation { continuation in
                let waiter = ReplyBox.Waiter.continuation(continuation)
                if executor.isCurrent {
                    // A caller isolated to this connection, or preferring its executor, is already on its
                    // thread: send without a hop. A task cancelled already must not send (its cancellation
                    // handler has run, but the `cancelCall` it queued comes after this).
                    if Task.isCancelled { box.isCancelled = true }
                    self.startCallOnThread(box, waiter)
                } else {
                    executor.async {
                        self.onThread { $0.startCall(box, waiter) }
                    }
                }
            }
        } onCancel: {
            executor.async {
                self.onThread { $0.cancelCall(box) }
            }
        }
        return try box.takeOutcome()
    }

    /// Sends `message` now and calls `completion` on the connection's executor with the reply, in the order
    /// messages arrive (used where a reply must be seen in order with signals, e.g. GetNameOwner).
    func sendWithReply(
        _ message: DBusMessage, timeout: Duration = .seconds(25),
        completion: @escaping @Sendable (isolated DBusConnection, Result<DBusMessage, any Error>) -> Void
    ) {
        startCall(ReplyBox(message: message, timeout: timeout), .callback(completion))
    }

    /// `startCall` from a caller already on the connection's thread, as `handleIncomingOnThread` does it (every
    /// call takes this path).
    nonisolated func startCallOnThread(_ box: ReplyBox, _ waiter: ReplyBox.Waiter) {
        precondition(executor.isCurrent, "not on the D-Bus connection's thread")
        let body: (isolated DBusConnection, ReplyBox, ReplyBox.Waiter) -> Void = { $0.startCall($1, $2) }
        unsafeBitCast(body, to: ((DBusConnection, ReplyBox, ReplyBox.Waiter) -> Void).self)(self, box, waiter)
    }

    func startCall(_ box: ReplyBox, _ waiter: ReplyBox.Waiter) {
        box.waiter = waiter
        if box.isCancelled {
            box.finish(.failure(CancellationError()), on: self)
            return
        }
        do {
            try checkOpen()
            try checkCanSend(box.message)
        } catch {
            box.finish(.failure(error), on: self)
            return
        }
        // On a connection libdbus already knows to be lost the message is dropped: the Disconnected signal it
        // has queued then fails this call with the others.
        guard let serial = libdbus_connection_send_returning_serial(handle.pointer, box.message.pointer) else {
            box.finish(.failure(DBusError.outOfMemory), on: self)
            return
        }
        box.serial = serial
        statistics.callsSent += 1
        if let nanoseconds = timeoutNanoseconds(box.timeout) {
            let (deadline, overflow) = ConnectionThread.now().addingReportingOverflow(nanoseconds)
            box.deadline = overflow ? ReplyBox.noDeadline : deadline
        }
        if let displaced = replies.insert(box) {
            displaced.finish(.failure(displaced.serialReusedError()), on: self)
        }
        // Brought forward only: a later deadline left armed fires early and finds nothing due, which is cheaper
        // than arming again for every reply.
        if box.deadline != ReplyBox.noDeadline, replies.earliestDeadline == box.deadline {
            executor.setDeadline(box.deadline, for: .calls)
        }
    }

    /// `ReplyBox.nanoseconds(timeout)`, remembering the last answer: nearly every call has the same timeout,
    /// and taking a `Duration` apart costs 128-bit arithmetic (visible in a call's profile).
    private func timeoutNanoseconds(_ timeout: Duration) -> Int64? {
        if let last = lastTimeout, last.timeout == timeout { return last.nanoseconds }
        let nanoseconds = ReplyBox.nanoseconds(timeout)
        lastTimeout = (timeout, nanoseconds)
        return nanoseconds
    }

    /// A method return or error reply came (through the message filter): hand it to its call. False when no
    /// call waits for it (one cancelled or timed out before its reply came).
    func complete(_ reply: DBusMessage) -> Bool {
        guard let box = replies.remove(serial: reply.replySerial) else { return false }
        if replies.isEmpty { executor.setDeadline(nil, for: .calls) }
        box.finish(Self.result(of: reply), on: self)
        return true
    }

    /// The connection's thread reached the earliest deadline: calls whose time is up fail with `.timeout`.
    func expireCalls() {
        for box in replies.removeDue(now: ConnectionThread.now()) {
            box.finish(.failure(box.timeoutError()), on: self)
        }
        executor.setDeadline(replies.earliestDeadline, for: .calls)
    }

    func cancelCall(_ box: ReplyBox) {
        box.isCancelled = true
        guard box.waiter != nil else { return }  // not sent yet (it will see `isCancelled`), or done
        _ = replies.remove(serial: box.serial)
        if replies.isEmpty { executor.setDeadline(nil, for: .calls) }
        box.finish(.failure(CancellationError()), on: self)
    }

    /// Fails every outstanding call with `error` (the connection is closed or lost).
    func failCalls(_ error: DBusError) {
        let boxes = replies.removeAll()
        executor.setDeadline(nil, for: .calls)
        for box in boxes { box.finish(.failure(error), on: self) }
    }

    /// A method return as success; an error reply as `DBusError` with the peer's name and message.
    static func result(of reply: DBusMessage) -> Result<DBusMessage, any Error> {
        guard reply.kind == .error else { return .success(reply) }
        let name = reply.errorName ?? DBusError.StandardName.failed
        let text = (try? reply.arguments())?.first?.string ?? ""
        return .failure(DBusError(name: name, message: text))
    }
}

/// One outstanding method call: its message, what waits for its reply and when it times out.
final class ReplyBox: @unchecked Sendable {
    // @unchecked Sendable: created on the caller's thread, then read and written only on the connection's
    // thread (every access is inside an isolated method of `DBusConnection`).

    enum Waiter: Sendable {
        /// A task, resumed once the outcome is in the box (``takeOutcome()``).
        case continuation(UnsafeContinuation<Void, Never>)
        case callback(@Sendable (isolated DBusConnection, Result<DBusMessage, any Error>) -> Void)
    }

    /// The deadline of a call that never times out.
    static let noDeadline = Int64.max

    let message: DBusMessage
    let timeout: Duration
    var waiter: Waiter?
    var isCancelled = false
    /// Set when sent: the serial its reply answers, and when it times out (nanoseconds since boot).
    var serial: UInt32 = 0
    var deadline = ReplyBox.noDeadline
    /// Its place in `OutstandingCalls`'s heap of deadlines; -1 outside it.
    var heapIndex = -1
    /// The reply or failure for a waiting task: written on the connection's thread before the task resumes.
    private var outcome: Result<DBusMessage, any Error>?
    /// Set (releasing) once `outcome` is written, read (acquiring) by the resumed task. Resuming the
    /// continuation orders the two already, but ThreadSanitizer does not see that order when the task resumes
    /// on Swift's global executor (libdispatch is not instrumented) and would report the reply as a race; an
    /// atomic flag gives it an order it understands, for one atomic store and load (a lock, the first design,
    /// cost an allocation and two lock round trips per call).
    private let isPublished = Atomic<Bool>(false)

    init(message: DBusMessage, timeout: Duration) {
        self.message = message
        self.timeout = timeout
    }

    /// `timeout` in nanoseconds, rounded up so that a call never times out before its time; nil when it is too
    /// long to count (the call never times out).
    static func nanoseconds(_ timeout: Duration) -> Int64? {
        let (seconds, attoseconds) = timeout.components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let total = whole.addingReportingOverflow((max(0, attoseconds) + 999_999_999) / 1_000_000_000)
        return overflow || total.overflow ? nil : total.partialValue
    }

    /// Hands `result` to whoever waits (once; later results are ignored).
    func finish(_ result: Result<DBusMessage, any Error>, on connection: isolated DBusConnection) {
        guard let waiter else { return }
        self.waiter = nil
        switch waiter {
        case .continuation(let continuation):
            outcome = result
            isPublished.store(true, ordering: .releasing)
            continuation.resume()
        case .callback(let callback):
            callback(connection, result)
        }
    }

    /// The outcome ``finish(_:on:)`` handed over, for the task it resumed.
    func takeOutcome() throws -> DBusMessage {
        guard isPublished.load(ordering: .acquiring), let outcome else {
            throw DBusError.disconnected("the call ended without a result")
        }
        return try outcome.get()
    }

    /// `.timeout` for a call still unanswered when its serial came round again: 2³² calls later, possible only
    /// for a call without a timeout.
    func serialReusedError() -> DBusError {
        DBusError(
            code: .timeout, name: DBusError.StandardName.noReply,
            message: "no reply to \(callDescription) before its serial \(serial) came round again (2³² calls later)")
    }

    /// `.timeout` with D-Bus's name for it, saying which call went unanswered.
    func timeoutError() -> DBusError {
        DBusError(
            code: .timeout, name: DBusError.StandardName.noReply,
            message: "no reply to \(callDescription) within \(timeout)")
    }

    /// "org.bluez.Device1.Connect on /org/bluez/hci0/dev_… of org.bluez", for errors.
    private var callDescription: String {
        let interface = message.interface.map { $0 + "." } ?? ""
        let member = message.member ?? "?"
        let path = message.path?.rawValue ?? "?"
        let destination = message.destination.map { " of \($0)" } ?? ""
        return "\(interface)\(member) on \(path)\(destination)"
    }
}
