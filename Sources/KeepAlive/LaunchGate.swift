/// What a registration's launch waits for before its callback runs, without a task of its own: the poll engine's
/// connection slot. At 10,000 devices on 3 slots nearly every poll of a tick waits, and a task per waiting poll
/// held 5–7 KiB of frames each; a request here is one closure in a queue.
///
/// The window is open while the launch waits, exactly as it is while a callback waits inside its task: the wait
/// counts against the budget. When the window ends first (expiry, ``KeepAlive/stop()``, sleep) the scheduler
/// withdraws the request; the callback never runs and the window is reported with the result the gate gives.
package protocol LaunchGate: Sendable {
    /// Asks for `window` to run. The gate calls `start` exactly once when the launch may run (at once, from
    /// inside this call, or later, from whichever thread frees the way), unless the request is withdrawn first.
    func request(_ window: PollWindow, start: @escaping @Sendable () -> Void) -> LaunchRequest

    /// Where a launch's task should run (the callback's own executor), so that a `start` called there begins
    /// the task without a thread hop; `nil`: the default executor.
    var preferredExecutor: (any TaskExecutor)? { get }

    /// Whether the window's report may be delivered on ``preferredExecutor``, right where the callback returned,
    /// instead of from a new task on the default executor: only when whoever receives reports never blocks (a
    /// record written to a regular file, not to a pipe). It saves a task and a thread switch per launch.
    var reportsOnPreferredExecutor: Bool { get }
}

extension LaunchGate {
    package var preferredExecutor: (any TaskExecutor)? { nil }
    package var reportsOnPreferredExecutor: Bool { false }
}

/// A request made to a ``LaunchGate``.
package struct LaunchRequest: Sendable {
    /// Takes the request back if `start` has not been called: returns what to report for the window (its
    /// callback never ran), or `nil` when `start` was called (or will be: it is being called right now).
    package let withdraw: @Sendable () -> PollResult?

    package init(withdraw: @escaping @Sendable () -> PollResult?) {
        self.withdraw = withdraw
    }

    /// A request that was granted at once: nothing to withdraw.
    package static let started = LaunchRequest { nil }
}
