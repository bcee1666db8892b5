/// A result that arrives once and is awaited by any number of tasks: a pending Connect that Disconnect can
/// cancel, one ReadValue answer shared by overlapping reads.
package final class Promise<Value: Sendable>: Sendable {
    private struct State {
        var result: Result<Value, any Error>?
        var waiters: [CheckedContinuation<Value, any Error>] = []
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

    /// Sets the result; the first call wins, later ones are ignored. Returns whether this call won.
    @discardableResult
    package func complete(_ result: Result<Value, any Error>) -> Bool {
        let waiters: [CheckedContinuation<Value, any Error>]? = state.withLock { state in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        guard let waiters else { return false }
        for waiter in waiters { waiter.resume(with: result) }
        return true
    }

}

extension Promise where Value == Void {
    package func succeed() { complete(.success(())) }
}
