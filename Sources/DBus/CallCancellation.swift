import Synchronization

/// Cancels one method call from outside the task that waits for it: the call fails at once with
/// `CancellationError` and its reply, if any comes, is ignored; a call not sent yet is never sent. The waiting
/// task itself is not cancelled, so it can go on (clean up, report why).
///
/// What BlueZ's object cache uses to end a call on a device that vanished or dropped its link, instead of waiting
/// for bluetoothd's reply or the D-Bus timeout, without a task per call to cancel.
///
/// ```swift
/// let cancellation = CallCancellation()
/// // elsewhere, on any thread: cancellation.cancel()
/// let reply = try await connection.call(destination: "org.bluez", path: path, interface: "org.bluez.Device1",
///                                       method: "Connect", cancellation: cancellation)
/// ```
public final class CallCancellation: Sendable {
    private enum State {
        case idle
        case attached(DBusConnection, ReplyBox)
        case cancelled
    }

    private let state = Mutex(State.idle)

    public init() {}

    /// True once ``cancel()`` was called.
    public var isCancelled: Bool {
        state.withLock { if case .cancelled = $0 { true } else { false } }
    }

    /// Ends the call (now, or as soon as it starts). Idempotent; from any thread.
    public func cancel() {
        let attached: (DBusConnection, ReplyBox)? = state.withLock { state in
            defer { state = .cancelled }
            if case .attached(let connection, let box) = state { return (connection, box) }
            return nil
        }
        guard let (connection, box) = attached else { return }
        if connection.executor.isCurrent {
            connection.onThread { $0.cancelCall(box) }
        } else {
            connection.executor.async { connection.onThread { $0.cancelCall(box) } }
        }
    }

    /// Ties `box` to this cancellation before it is sent; false when it was cancelled already (the call must not
    /// be sent). One call per cancellation: a second replaces the first.
    func attach(_ box: ReplyBox, on connection: DBusConnection) -> Bool {
        state.withLock { state in
            if case .cancelled = state { return false }
            state = .attached(connection, box)
            return true
        }
    }
}
