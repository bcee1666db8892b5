import Basics

/// One piece of work on a device at a time: a scheduled poll, a poll asked for by a command and a deferred task
/// (``DeferredTaskScheduler``) wait for each other here (first come, first served), so a device is never connected
/// twice at once. The scheduler already keeps two scheduled polls of one device apart (the overlap skip); this
/// covers work from outside its grid.
///
/// ```swift
/// try await gate.withDevice("fern") { try await downloadHistory() }
/// ```
public final class DeviceGate: Sendable {
    private struct State {
        var busy: Set<String> = []
        /// Who holds a device, for those who said (``enter(_:holder:)``).
        var holders: [String: String] = [:]
        var waiters: [String: [(id: UInt64, holder: String?, continuation: CheckedContinuation<Void, any Error>)]] =
            [:]
        var nextID: UInt64 = 0
    }

    private let state = Locked(State())

    public init() {}

    /// Waits until `device` is free and takes it; throws `CancellationError` when cancelled while waiting.
    /// `holder` says who holds it (``holder(of:)``), for work that others should not queue behind, such as a
    /// deferred task's long link: a scheduled poll then gives its tick up at once rather than wait.
    public func enter(_ device: String, holder: String? = nil) async throws {
        let id: UInt64? = state.withLock { state in
            guard state.busy.contains(device) else {
                state.busy.insert(device)
                state.holders[device] = holder
                return nil
            }
            state.nextID += 1
            return state.nextID
        }
        guard let id else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome: Result<Void, any Error>? = state.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    // Freed between the first look and here: take it.
                    guard state.busy.contains(device) else {
                        state.busy.insert(device)
                        state.holders[device] = holder
                        return .success(())
                    }
                    state.waiters[device, default: []].append((id, holder, continuation))
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let cancelled = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiters[device]?.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters[device]?.remove(at: index).continuation
            }
            cancelled?.resume(throwing: CancellationError())
        }
    }

    /// Frees `device`, handing it to the first waiter if any (it stays busy for that one).
    public func leave(_ device: String) {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard var queue = state.waiters[device], !queue.isEmpty else {
                state.busy.remove(device)
                state.holders[device] = nil
                return nil
            }
            let first = queue.removeFirst()
            state.holders[device] = first.holder
            state.waiters[device] = queue.isEmpty ? nil : queue
            return first.continuation
        }
        next?.resume()
    }

    /// Runs `body` holding `device`, and frees it on every path. Throws `CancellationError` when cancelled while
    /// waiting (then `body` never ran).
    public func withDevice<Result: Sendable>(
        _ device: String, holder: String? = nil, _ body: () async throws -> Result
    ) async throws -> Result {
        try await enter(device, holder: holder)
        defer { leave(device) }
        return try await body()
    }

    /// Who holds `device` now, when the holder said (``enter(_:holder:)``).
    public func holder(of device: String) -> String? {
        state.withLock { $0.holders[device] }
    }

    /// Whether someone holds `device` now.
    public func isBusy(_ device: String) -> Bool {
        state.withLock { $0.busy.contains(device) }
    }
}
