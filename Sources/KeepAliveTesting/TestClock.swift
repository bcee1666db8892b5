import Basics

/// A clock that moves only when a test moves it: sleepers wake in deadline order, time never goes backwards.
///
/// `advance(to:)` sets the time and wakes every sleeper whose deadline has come, earliest first — like a
/// suspend or a clock jump when it skips several deadlines. To walk time deadline by deadline, wait for the
/// system to go to sleep, then advance to exactly the instant it sleeps until:
///
/// ```swift
/// let clock = TestClock()
/// let keepAlive = KeepAlive(clock: clock)
/// …
/// try await clock.waitForSleeper(until: clock.now.advanced(by: .seconds(30)))
/// clock.advance(by: .seconds(30))
/// ```
///
/// Waits on sleepers are bounded by a real-time timeout so a test that expects the wrong deadline fails with
/// a message listing what is pending, instead of hanging.
public final class TestClock: Clock, Sendable {
    public struct Instant: InstantProtocol, CustomStringConvertible {
        public var offset: Duration

        public init(offset: Duration) {
            self.offset = offset
        }

        public func advanced(by duration: Duration) -> Instant {
            Instant(offset: offset + duration)
        }

        public func duration(to other: Instant) -> Duration {
            other.offset - offset
        }

        public static func < (lhs: Instant, rhs: Instant) -> Bool {
            lhs.offset < rhs.offset
        }

        public var description: String { "t+\(offset)" }
    }

    /// Thrown by the waits when the condition did not hold in time.
    public struct WaitTimeout: Error, CustomStringConvertible {
        public var description: String

        public init(description: String) {
            self.description = description
        }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct Watcher {
        var condition: @Sendable ([Instant]) -> Bool
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var nextID: UInt64 = 0
        var sleepers: [UInt64: Sleeper] = [:]
        var watchers: [UInt64: Watcher] = [:]
    }

    private let state = Locked(State())

    public init() {}

    public var now: Instant {
        state.withLock { $0.now }
    }

    public var minimumResolution: Duration { .zero }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (wakeNow, watchers): (Bool, [CheckedContinuation<Void, Never>]) = state.withLock { state in
                    if deadline <= state.now { return (true, []) }
                    if Task.isCancelled { return (true, []) }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return (false, Self.satisfiedWatchers(&state))
                }
                for watcher in watchers { watcher.resume() }
                if wakeNow { continuation.resume() }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
        try Task.checkCancellation()
    }

    /// Moves time forward by `duration` and wakes every sleeper due, earliest first.
    public func advance(by duration: Duration) {
        advance(to: now.advanced(by: duration))
    }

    /// Sets the time to `instant` (never backwards) and wakes every sleeper due, earliest first.
    public func advance(to instant: Instant) {
        let due: [Sleeper] = state.withLock { state in
            precondition(instant >= state.now, "TestClock never goes backwards (now \(state.now), asked \(instant))")
            state.now = instant
            let due = state.sleepers.filter { $0.value.deadline <= instant }.sorted {
                ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key)
            }
            for (id, _) in due { state.sleepers.removeValue(forKey: id) }
            return due.map(\.value)
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// The deadlines tasks are sleeping until, earliest first.
    public var pendingDeadlines: [Instant] {
        state.withLock { $0.sleepers.values.map(\.deadline).sorted() }
    }

    /// Waits until some task sleeps until exactly `deadline`.
    public func waitForSleeper(until deadline: Instant, timeout: Duration = .seconds(10)) async throws {
        try await waitFor("a sleeper until \(deadline)", timeout: timeout) { $0.contains(deadline) }
    }

    /// Waits until at least `count` tasks sleep until exactly `deadline`.
    public func waitForSleepers(count: Int, until deadline: Instant, timeout: Duration = .seconds(10)) async throws {
        try await waitFor("\(count) sleepers until \(deadline)", timeout: timeout) { deadlines in
            deadlines.count { $0 == deadline } >= count
        }
    }

    /// Waits until at least `count` tasks sleep.
    public func waitForSleepers(count: Int, timeout: Duration = .seconds(10)) async throws {
        try await waitFor("\(count) sleepers", timeout: timeout) { $0.count >= count }
    }

    /// Waits until some task sleeps, then advances to the earliest deadline; returns it.
    @discardableResult
    public func advanceToNextDeadline(timeout: Duration = .seconds(10)) async throws -> Instant {
        try await waitForSleepers(count: 1, timeout: timeout)
        let next = pendingDeadlines.first!
        advance(to: next)
        return next
    }

    private func waitFor(
        _ what: String,
        timeout: Duration,
        condition: @escaping @Sendable ([Instant]) -> Bool
    ) async throws {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let ready: Bool = self.state.withLock { state in
                        if condition(state.sleepers.values.map(\.deadline)) { return true }
                        state.watchers[id] = Watcher(condition: condition, continuation: continuation)
                        return false
                    }
                    if ready { continuation.resume() }
                }
                return true
            }
            group.addTask {
                // A real-time safety net, not a synchronisation: the test fails instead of hanging.
                try? await Task.sleep(for: timeout * safetyNetScale)
                return false
            }
            let satisfied = try await group.next() ?? false
            if !satisfied {
                let watcher = state.withLock { $0.watchers.removeValue(forKey: id) }
                watcher?.continuation.resume()
                let pending = pendingDeadlines.map(\.description).joined(separator: ", ")
                group.cancelAll()
                throw WaitTimeout(
                    description:
                        """
                            TestClock: no \(what) within \(timeout * safetyNetScale) (now \(now); sleeping until: \
                            [\(pending)])
                            """
                )
            }
            group.cancelAll()
        }
    }

    private static func satisfiedWatchers(_ state: inout State) -> [CheckedContinuation<Void, Never>] {
        guard !state.watchers.isEmpty else { return [] }
        let deadlines = state.sleepers.values.map(\.deadline)
        let ready = state.watchers.filter { $0.value.condition(deadlines) }
        for id in ready.keys { state.watchers.removeValue(forKey: id) }
        return ready.values.map(\.continuation)
    }
}
