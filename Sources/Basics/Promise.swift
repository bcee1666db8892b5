/// A result that arrives once and is awaited by any number of tasks: a pending Connect that Disconnect can
/// cancel, one ReadValue answer shared by overlapping reads.
package final class Promise<Value: Sendable>: Sendable {
    private struct State {
        var result: Result<Value, any Error>?
        var waiters: [CheckedContinuation<Value, any Error>] = []
        /// Waiters that stop waiting when their task is cancelled, by id.
        var cancellable: [(id: UInt64, continuation: CheckedContinuation<Result<Value, any Error>?, Never>)] = []
        var nextID: UInt64 = 0

        typealias Waiters = (
            plain: [CheckedContinuation<Value, any Error>],
            cancellable: [CheckedContinuation<Result<Value, any Error>?, Never>]
        )
    }

    private let state = Locked(State())

    package init() {}

    /// Waits for the result (at once when it is already there).
    package func value() async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Result<Value, any Error>? = state.withLock { state in
                if let result = state.result { return result }
                state.waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    /// Waits for the result, or until the calling task is cancelled, whichever comes first: nil then (the result
    /// itself is not affected, and other waiters go on waiting).
    package func valueUnlessCancelled() async -> Result<Value, any Error>? {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Value, any Error>?, Never>) in
                // Checked under the lock: a cancellation that came before this registration found nothing to
                // resume.
                let now: Result<Value, any Error>?? = state.withLock { state in
                    if let result = state.result { return .some(result) }
                    if Task.isCancelled { return .some(nil) }
                    state.cancellable.append((id, continuation))
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                state.cancellable.firstIndex { $0.id == id }.map { state.cancellable.remove(at: $0).continuation }
            }
            waiter?.resume(returning: nil)
        }
    }

    /// Sets the result; the first call wins, later ones are ignored. Returns whether this call won.
    @discardableResult
    package func complete(_ result: Result<Value, any Error>) -> Bool {
        let waiters = state.withLock { state -> (State.Waiters)? in
            guard state.result == nil else { return nil }
            state.result = result
            defer {
                state.waiters.removeAll()
                state.cancellable.removeAll()
            }
            return (state.waiters, state.cancellable.map(\.continuation))
        }
        guard let (plain, cancellable) = waiters else { return false }
        for waiter in plain { waiter.resume(with: result) }
        for waiter in cancellable { waiter.resume(returning: result) }
        return true
    }

}

extension Promise where Value == Void {
    package func succeed() { complete(.success(())) }
}
