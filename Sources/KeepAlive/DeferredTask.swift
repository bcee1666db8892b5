import Basics

/// One run of a deferred task, handed to its handler: iOS's `BGTask`, in a window of the scheduler's ledger.
///
/// The handler returns when the work is done (success), or throws (failure: the request is tried again with
/// backoff). As on iOS it may instead call ``setTaskCompleted(success:)``, which then decides. At the window's end
/// the ``expirationHandler`` runs and the handler's task is cancelled; a handler that still has not returned a grace
/// later is abandoned and its window force-ended.
///
/// ```swift
/// scheduler.register("history.fern", kind: .processing) { task in
///     task.expirationHandler = { log("out of time at entry \(position)") }
///     for entry in try await sensor.history(after: position) {
///         try Task.checkCancellation()
///         publish(entry)
///     }
///     task.setTaskCompleted(success: true)
/// }
/// ```
public final class DeferredTask: Sendable {
    private struct State {
        var expirationHandler: (@Sendable () -> Void)?
        var expired = false
        var completion: Bool?
    }

    public let identifier: String
    public let request: DeferredTaskRequest
    /// 1 for the first run of a request, 2 for its first retry after a failure…
    public let attempt: Int
    /// The ledger window the run is in (its ``PollWindow/timeRemaining`` is iOS's `backgroundTimeRemaining`).
    public let window: PollWindow
    private let state = Locked(State())

    init(request: DeferredTaskRequest, attempt: Int, window: PollWindow) {
        self.identifier = request.identifier
        self.request = request
        self.attempt = attempt
        self.window = window
    }

    /// Runs once, when the window's budget runs out (or the ledger expires windows early: shutdown, sleep), before
    /// the handler's task is cancelled. Set it early; it must be quick. Set after the expiry, it runs at once.
    public var expirationHandler: (@Sendable () -> Void)? {
        get { state.withLock { $0.expirationHandler } }
        set {
            let runNow = state.withLock { state -> Bool in
                state.expirationHandler = state.expired ? nil : newValue
                return state.expired
            }
            if runNow { newValue?() }
        }
    }

    /// Ends the run with this outcome, whatever the handler does after (the first call decides; a failure is tried
    /// again with backoff).
    public func setTaskCompleted(success: Bool) {
        state.withLock { state in
            if state.completion == nil { state.completion = success }
        }
    }

    /// Whether the window expired during the run.
    public var isExpired: Bool { state.withLock { $0.expired } }

    /// What ``setTaskCompleted(success:)`` said, if it was called.
    var completion: Bool? { state.withLock { $0.completion } }

    /// The ledger's expiration handler for the window.
    func expire() {
        let handler = state.withLock { state -> (@Sendable () -> Void)? in
            state.expired = true
            defer { state.expirationHandler = nil }
            return state.expirationHandler
        }
        handler?()
    }
}
