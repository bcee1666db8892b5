import Locking

/// A wait that ends at an instant on the clock or when someone rings, whichever comes first.
///
/// The scheduler's loop and the ledger's driver each sleep on one: a new registration, a power change or an
/// earlier ledger deadline rings it so the loop recomputes at once. A ring with nobody waiting is remembered,
/// so a ring that races a new wait is never lost. Task cancellation of the waiter also ends the wait.
package final class Alarm: Sendable {
    private struct State {
        var ringPending = false
        var generation: UInt64 = 0
        var waiter: CheckedContinuation<Void, Never>?
        var sleeper: Task<Void, Never>?
    }

    private let time: TimeBase
    private let state = Locked(State())

    package init(time: TimeBase) {
        self.time = time
    }

    /// Waits until `deadline` (or forever when `nil`), until ``ring()``, or until the task is cancelled.
    package func wait(until deadline: KeepAliveInstant?) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow: Bool = state.withLock { state in
                    if state.ringPending {
                        state.ringPending = false
                        return true
                    }
                    state.generation &+= 1
                    state.waiter = continuation
                    if let deadline {
                        let generation = state.generation
                        let time = self.time
                        state.sleeper = Task { [weak self] in
                            do {
                                try await time.sleep(until: deadline)
                            } catch {
                                return  // cancelled by ring(): the ringer resumes the waiter
                            }
                            self?.expire(generation: generation)
                        }
                    }
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            ring()
        }
    }

    /// Ends the current wait now, or the next one at once if nobody is waiting.
    package func ring() {
        let (waiter, sleeper): (CheckedContinuation<Void, Never>?, Task<Void, Never>?) = state.withLock { state in
            guard let waiter = state.waiter else {
                state.ringPending = true
                return (nil, nil)
            }
            state.waiter = nil
            defer { state.sleeper = nil }
            return (waiter, state.sleeper)
        }
        sleeper?.cancel()
        waiter?.resume()
    }

    private func expire(generation: UInt64) {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            guard state.generation == generation, let waiter = state.waiter else { return nil }
            state.waiter = nil
            state.sleeper = nil
            return waiter
        }
        waiter?.resume()
    }
}
