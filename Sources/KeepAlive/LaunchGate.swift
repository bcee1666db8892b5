/// What a registration's launch waits for before its task exists: a resource it must hold to run (the poll
/// engine's connection slot), or a decision that the tick is not this process's to run at all. At 10,000
/// registrations on 3 slots nearly every launch of a tick waits, and a task per waiting launch held 5–7 KiB of
/// frames each; a request here is one closure in a queue.
///
/// The window is open while the launch waits, exactly as it is while a callback waits inside its task: the wait
/// counts against the budget. When the window ends first (expiry, ``KeepAlive/stop()``, sleep) the scheduler
/// withdraws the request; the work never runs and the window is reported with the result the gate gives.
package protocol LaunchGate: Sendable {
    /// Asks for `window` to run. The gate either declines the tick (returns ``LaunchRequest/declined`` without
    /// calling `start`) or calls `start` exactly once with the work to run, when it may (at once, from inside
    /// this call, or later, from whichever thread frees the way), unless the request is withdrawn first. The
    /// work carries what the gate decided (the device's holder, its adapter) as values it captured.
    func request(_ window: PollWindow, start: @escaping @Sendable (@escaping LaunchWork) -> Void) -> LaunchRequest

    /// Where a launch's task should run (the work's own executor), so that a `start` called there begins the task
    /// without a thread hop; `nil`: the default executor.
    var preferredExecutor: (any TaskExecutor)? { get }

    /// Whether the window's report may be delivered on ``preferredExecutor``, right where the work returned,
    /// instead of from a new task on the default executor: only when whoever receives reports never blocks.
    var reportsOnPreferredExecutor: Bool { get }
}

extension LaunchGate {
    package var preferredExecutor: (any TaskExecutor)? { nil }
    package var reportsOnPreferredExecutor: Bool { false }
}

/// The work of one launch: what a callback returns, and a value of its own that comes back in the tick's
/// ``TickReport/detail``.
package typealias LaunchWork = @Sendable (PollWindow) async -> LaunchResult

/// What a launch's work returns to the scheduler.
package struct LaunchResult: Sendable {
    /// Counted by the scheduler: a failure backs the registration off, anything else resets its backoff.
    package var result: PollResult
    /// Handed back untouched in the report (the poll engine's `PollOutcome` (module Polling)).
    package var detail: (any Sendable)?
    /// A failure of the host's, not the registration's: the work never got what its gate waits for (a connection
    /// slot the other registrations held). Reported as the failure it is, counted in
    /// ``KeepAlive/Statistics/contended``, and leaves the backoff as it was.
    package var isContention: Bool
    /// A failure that says nothing of how hard the device is to reach (it was not heard advertising, so nothing
    /// was tried): counted as a failure, and leaves the backoff as it was, like contention.
    package var keepsBackoff: Bool

    package init(
        _ result: PollResult, detail: (any Sendable)? = nil, isContention: Bool = false, keepsBackoff: Bool = false
    ) {
        self.result = result
        self.detail = detail
        self.isContention = isContention
        self.keepsBackoff = keepsBackoff
    }
}

/// A request made to a ``LaunchGate``.
package struct LaunchRequest: Sendable {
    /// Takes the request back if `start` has not been called: returns what to report for the window (its work
    /// never ran), or `nil` when `start` was called (or will be: it is being called right now).
    package let withdraw: @Sendable () -> LaunchResult?
    /// The gate declined the tick: no work runs, and the tick is reported as ``TickReport/Outcome/declined``.
    package let isDeclined: Bool
    /// The report's detail if the work never returns one (its window is force-ended): what the gate decided.
    package let fallbackDetail: (any Sendable)?

    /// A request still waiting (`withdraw` takes it back), or granted at once (`withdraw` returns `nil`).
    package init(fallbackDetail: (any Sendable)? = nil, withdraw: @escaping @Sendable () -> LaunchResult? = { nil }) {
        self.withdraw = withdraw
        self.isDeclined = false
        self.fallbackDetail = fallbackDetail
    }

    private init(declined: Bool) {
        self.withdraw = { nil }
        self.isDeclined = declined
        self.fallbackDetail = nil
    }

    /// A request that was granted at once: nothing to withdraw.
    package static let started = LaunchRequest()
    /// Not this process's tick to run (another gateway holds the device).
    package static let declined = LaunchRequest(declined: true)
}
