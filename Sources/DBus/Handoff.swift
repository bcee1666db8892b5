import Basics

/// A value handed from the connection's thread to a task resumed by a continuation.
///
/// The continuation already orders the two sides, but ThreadSanitizer on Linux does not see that order
/// when the resumed task runs on Swift's global executor and reports every object made on the queue as a
/// race. Passing the value through a mutex gives the order a form the sanitizer understands, at the cost of
/// one uncontended lock per hand-off.
///
/// ```swift
/// let handoff = Handoff<Int>()
/// await withCheckedContinuation { continuation in
///     queue.async { handoff.put(.success(42)); continuation.resume() }
/// }
/// let value = try handoff.take()
/// ```
final class Handoff<Value: Sendable>: Sendable {
    private let slot = Locked<Result<Value, any Error>?>(nil)

    func put(_ result: Result<Value, any Error>) {
        slot.withLock { $0 = result }
    }

    func take() throws -> Value {
        let result = slot.withLock { slot -> Result<Value, any Error>? in
            defer { slot = nil }
            return slot
        }
        guard let result else { throw DBusError.disconnected("no result was handed over") }
        return try result.get()
    }
}
