import Basics

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
        /// What ends the wait at its deadline: a call on the clock's timer thread, or, for a clock without one (a
        /// test's manual clock), a task sleeping on the clock.
        var timer: TimerCall?
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
                    // A deadline already passed ends the wait here, as a sleep would: the timer thread is not woken
                    // for it.
                    if let deadline, deadline <= time.now { return true }
                    state.generation &+= 1
                    state.waiter = continuation
                    if let deadline {
                        let generation = state.generation
                        let time = self.time
                        // The waiter's task is resumed from the timer thread straight onto its own executor.
                        if let timer = time.call(at: deadline, { [weak self] in self?.expire(generation: generation) })
                        {
                            state.timer = timer
                            return false
                        }
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
        let (waiter, timer, sleeper): (CheckedContinuation<Void, Never>?, TimerCall?, Task<Void, Never>?) =
            state.withLock { state in
                guard let waiter = state.waiter else {
                    state.ringPending = true
                    return (nil, nil, nil)
                }
                state.waiter = nil
                defer {
                    state.timer = nil
                    state.sleeper = nil
                }
                return (waiter, state.timer, state.sleeper)
            }
        timer?.cancel()
        sleeper?.cancel()
        waiter?.resume()
    }

    private func expire(generation: UInt64) {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            guard state.generation == generation, let waiter = state.waiter else { return nil }
            state.waiter = nil
            state.timer = nil
            state.sleeper = nil
            return waiter
        }
        waiter?.resume()
    }
}
