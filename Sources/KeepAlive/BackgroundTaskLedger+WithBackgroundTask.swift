import Basics

/// Why `withBackgroundTask` did not return the body's value.
public struct BackgroundTaskError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        /// The ledger is closed (shutting down or going to sleep); the body never ran.
        case refused
        /// The body ignored expiry and was not done within the grace; the ledger force-ended the window.
        case forcedEnd
    }

    public var code: Code
    public var name: String

    public init(code: Code, name: String) {
        self.code = code
        self.name = name
    }

    public var description: String {
        switch code {
        case .refused: "background task '\(name)' refused: the ledger is closed"
        case .forcedEnd: "background task '\(name)' force-ended after its deadline and grace period"
        }
    }
}

extension BackgroundTaskLedger {
    /// Begins a window, runs `body` in it as a cancellable task, and ends the window on every path.
    ///
    /// At the deadline the body's task is cancelled. If it has not returned a grace period later, the window is
    /// force-ended and this call throws ``BackgroundTaskError/Code/forcedEnd`` at once (the body's task is left
    /// cancelled; it cannot hold the caller hostage). Cancelling the caller cancels the body.
    ///
    /// ```swift
    /// let value = try await ledger.withBackgroundTask(name: "greenhouse-3", budget: .seconds(20)) { window in
    ///     try await sensor.read(timeout: window.timeRemaining)
    /// }
    /// ```
    public func withBackgroundTask<Result: Sendable>(
        name: String,
        budget: Duration,
        expirationHandler: (@Sendable () -> Void)? = nil,
        _ body: @escaping @Sendable (PollWindow) async throws -> Result
    ) async throws -> Result {
        let box = WindowTaskBox<Result>()
        let id = begin(
            name: name,
            budget: budget,
            expirationHandler: expirationHandler,
            hooks: Hooks(
                cancel: { box.cancel() },
                forcedEnd: { _ in box.finish(.failure(BackgroundTaskError(code: .forcedEnd, name: name))) }
            )
        )
        guard id != .invalid else {
            throw BackgroundTaskError(code: .refused, name: name)
        }
        guard let entry = state.withLock({ $0.open[id]?.entry }) else {
            // Force-ended before we got here: only possible with a zero grace and a clock far ahead.
            throw BackgroundTaskError(code: .forcedEnd, name: name)
        }
        let window = PollWindow(entry: entry, tick: 0, ledger: self)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Result, any Error>) in
                box.start(continuation: continuation) {
                    let result: Swift.Result<Result, any Error>
                    do {
                        result = .success(try await body(window))
                    } catch {
                        result = .failure(error)
                    }
                    self.end(id)
                    box.finish(result)
                }
            }
        } onCancel: {
            box.cancel()
        }
    }
}

/// Joins the body's task, the ledger's expiry and force-end, and the caller's cancellation: whichever finishes
/// first resumes the caller, exactly once.
final class WindowTaskBox<Result: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Result, any Error>?
        var task: Task<Void, Never>?
        var cancelRequested = false
        var finished = false
        /// A result that arrived before the caller started waiting (a force-end racing the start).
        var early: Swift.Result<Result, any Error>?
    }

    private let state = Locked(State())

    func start(continuation: CheckedContinuation<Result, any Error>, operation: @escaping @Sendable () async -> Void) {
        let early: Swift.Result<Result, any Error>? = state.withLock { state in
            if let early = state.early {
                state.early = nil
                return early
            }
            state.continuation = continuation
            let task = Task { await operation() }
            state.task = task
            if state.cancelRequested { task.cancel() }
            return nil
        }
        if let early { continuation.resume(with: early) }
    }

    func cancel() {
        let task: Task<Void, Never>? = state.withLock { state in
            state.cancelRequested = true
            return state.task
        }
        task?.cancel()
    }

    func finish(_ result: Swift.Result<Result, any Error>) {
        let continuation: CheckedContinuation<Result, any Error>? = state.withLock { state in
            guard !state.finished else { return nil }
            state.finished = true
            guard let continuation = state.continuation else {
                state.early = result
                return nil
            }
            state.continuation = nil
            return continuation
        }
        continuation?.resume(with: result)
    }
}
