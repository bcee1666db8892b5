import Locking
import Timing

/// Bounds simultaneous connections per adapter, fairly: when a slot frees, the waiting device served least
/// recently gets it, so no device starves however the ticks' tasks happen to arrive.
package final class ConnectionLimiter: Sendable {
    private struct Waiter: Comparable {
        var lastServed: UInt64
        var arrival: UInt64

        static func < (lhs: Waiter, rhs: Waiter) -> Bool {
            (lhs.lastServed, lhs.arrival) < (rhs.lastServed, rhs.arrival)
        }
    }

    private struct AdapterState {
        var inUse = 0
        var highWater = 0
        var queue = Heap<Waiter>()
        var continuations: [UInt64: CheckedContinuation<Void, any Error>] = [:]
    }

    private struct State {
        var adapters: [String: AdapterState] = [:]
        /// Serve order per device key; 0 = never served (goes first).
        var lastServed: [String: UInt64] = [:]
        var serveCounter: UInt64 = 0
        var arrivals: UInt64 = 0
    }

    package let maxPerAdapter: Int
    private let state = Locked(State())

    package init(maxPerAdapter: Int) {
        precondition(maxPerAdapter > 0, "maxConnections must be at least 1")
        self.maxPerAdapter = maxPerAdapter
    }

    /// Waits for a slot on `adapter` for `key`; throws `CancellationError` if cancelled while waiting.
    package func acquire(adapter: String, key: String) async throws {
        let arrival: UInt64? = state.withLock { state in
            if state.adapters[adapter, default: AdapterState()].inUse < maxPerAdapter {
                Self.grant(&state, adapter: adapter, key: key)
                return nil
            }
            state.arrivals += 1
            return state.arrivals
        }
        guard let arrival else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Decision { case cancelled, granted, queued }
                let decision: Decision = state.withLock { state in
                    if Task.isCancelled { return .cancelled }
                    // A slot may have been released between the fast path and here.
                    if state.adapters[adapter, default: AdapterState()].inUse < maxPerAdapter {
                        Self.grant(&state, adapter: adapter, key: key)
                        return .granted
                    }
                    let waiter = Waiter(lastServed: state.lastServed[key] ?? 0, arrival: arrival)
                    state.adapters[adapter]!.queue.insert(waiter)
                    state.adapters[adapter]!.continuations[arrival] = continuation
                    return .queued
                }
                switch decision {
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .granted: continuation.resume()
                case .queued: break  // release() or the cancellation handler resumes it
                }
            }
        } onCancel: {
            let continuation = state.withLock { $0.adapters[adapter]?.continuations.removeValue(forKey: arrival) }
            continuation?.resume(throwing: CancellationError())
        }
        // Record the serve for fairness (a handed-over slot was granted in release()).
        state.withLock { state in
            state.serveCounter += 1
            state.lastServed[key] = state.serveCounter
        }
    }

    /// Returns a slot; hands it straight to the fairest waiter if there is one.
    package func release(adapter: String) {
        let next: CheckedContinuation<Void, any Error>? = state.withLock { state in
            guard state.adapters[adapter] != nil else { return nil }
            // Mutated in place through the dictionary: a local copy would copy the whole queue on write.
            while let waiter = state.adapters[adapter]!.queue.popMin() {
                if let continuation = state.adapters[adapter]!.continuations.removeValue(forKey: waiter.arrival) {
                    return continuation  // the slot passes on; inUse unchanged
                }
            }
            state.adapters[adapter]!.inUse -= 1
            return nil
        }
        next?.resume()
    }

    /// The most slots ever in use at once on `adapter`.
    package func highWater(adapter: String) -> Int {
        state.withLock { $0.adapters[adapter]?.highWater ?? 0 }
    }

    private static func grant(_ state: inout State, adapter: String, key: String) {
        state.adapters[adapter, default: AdapterState()].inUse += 1
        let inUse = state.adapters[adapter]!.inUse
        if inUse > state.adapters[adapter]!.highWater { state.adapters[adapter]!.highWater = inUse }
        state.serveCounter += 1
        state.lastServed[key] = state.serveCounter
    }
}
