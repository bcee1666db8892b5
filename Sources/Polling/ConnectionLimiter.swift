import KeepAlive
import Basics

/// Bounds simultaneous connections per adapter, fairly: when a slot frees, the waiting device served least
/// recently gets it, so no device starves however the ticks' tasks happen to arrive.
package final class ConnectionLimiter: Sendable {
    private struct Waiter: Comparable {
        var lastServed: UInt64
        var arrival: UInt64
        var key: String

        static func < (lhs: Waiter, rhs: Waiter) -> Bool {
            (lhs.lastServed, lhs.arrival) < (rhs.lastServed, rhs.arrival)
        }
    }

    private struct AdapterState {
        var inUse = 0
        var highWater = 0
        var queue = Heap<Waiter>()
        /// Arrival → what to call when the slot is theirs (a continuation to resume, or a launch to start).
        var grants: [UInt64: @Sendable () -> Void] = [:]
    }

    private struct State {
        var adapters: [String: AdapterState] = [:]
        /// Serve order per device key; 0 = never served (goes first).
        var lastServed: [String: UInt64] = [:]
        var serveCounter: UInt64 = 0
        var arrivals: UInt64 = 0
    }

    /// A place in an adapter's queue, to take back with ``withdraw(_:)``.
    package struct Ticket: Sendable {
        let adapter: String
        let arrival: UInt64
    }

    package let maxPerAdapter: Int
    private let state = Locked(State())

    package init(maxPerAdapter: Int) {
        precondition(maxPerAdapter > 0, "maxConnections must be at least 1")
        self.maxPerAdapter = maxPerAdapter
    }

    /// Takes a slot on `adapter` for `key` now if one is free (`nil`: granted, `granted` is not called), or
    /// queues `granted` to be called, from the releasing thread, when the slot is handed over.
    package func request(adapter: String, key: String, granted: @escaping @Sendable () -> Void) -> Ticket? {
        state.withLock { state in
            if state.adapters[adapter, default: AdapterState()].inUse < maxPerAdapter {
                Self.grant(&state, adapter: adapter, key: key)
                return nil
            }
            state.arrivals += 1
            let arrival = state.arrivals
            state.adapters[adapter]!.queue.insert(
                Waiter(lastServed: state.lastServed[key] ?? 0, arrival: arrival, key: key))
            state.adapters[adapter]!.grants[arrival] = granted
            return Ticket(adapter: adapter, arrival: arrival)
        }
    }

    /// Leaves the queue: `true` if the ticket was still waiting (its `granted` will never be called), `false` if
    /// the slot was handed over already (its `granted` was or is being called, and the slot must be released).
    package func withdraw(_ ticket: Ticket) -> Bool {
        state.withLock { state in
            guard state.adapters[ticket.adapter]?.grants.removeValue(forKey: ticket.arrival) != nil else {
                return false
            }
            // Withdrawn waiters leave the heap lazily, when a release pops them; with nobody left, at once.
            if state.adapters[ticket.adapter]!.grants.isEmpty { state.adapters[ticket.adapter]!.queue = Heap() }
            return true
        }
    }

    /// Waits for a slot on `adapter` for `key`; throws `CancellationError` if cancelled while waiting.
    package func acquire(adapter: String, key: String) async throws {
        typealias Box = (ticket: Ticket?, continuation: CheckedContinuation<Void, any Error>?, cancelled: Bool)
        let box = Locked<Box>((nil, nil, false))
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                guard let queued = request(adapter: adapter, key: key, granted: { continuation.resume() }) else {
                    return continuation.resume()
                }
                // A cancellation that came before the ticket was stored found nothing to withdraw: seen here.
                let cancelled = box.withLock { box in
                    box.ticket = queued
                    box.continuation = continuation
                    return box.cancelled
                }
                if cancelled, withdraw(queued) { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let (queued, continuation) = box.withLock { box in
                box.cancelled = true
                return (box.ticket, box.continuation)
            }
            // Still queued: out of the queue, and the wait ends. Handed the slot already: the grant resumed it.
            if let queued, let continuation, withdraw(queued) { continuation.resume(throwing: CancellationError()) }
        }
    }

    /// Returns a slot; hands it straight to the fairest waiter if there is one.
    package func release(adapter: String) {
        let next: (@Sendable () -> Void)? = state.withLock { state in
            guard state.adapters[adapter] != nil else { return nil }
            // Mutated in place through the dictionary: a local copy would copy the whole queue on write.
            while let waiter = state.adapters[adapter]!.queue.popMin() {
                if let grant = state.adapters[adapter]!.grants.removeValue(forKey: waiter.arrival) {
                    state.serveCounter += 1
                    state.lastServed[waiter.key] = state.serveCounter
                    return grant  // the slot passes on; inUse unchanged
                }
            }
            state.adapters[adapter]!.inUse -= 1
            return nil
        }
        next?()
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
