import KeepAlive
import KeepAliveTesting
import Basics

extension TestClock.Instant {
    init(_ instant: KeepAliveInstant) {
        self.init(offset: instant.offset)
    }
}

extension KeepAliveInstant {
    static func at(_ duration: Duration) -> KeepAliveInstant {
        KeepAliveInstant(offset: duration)
    }
}

extension TestClock {
    func instant(_ duration: Duration) -> TestClock.Instant {
        TestClock.Instant(offset: duration)
    }
}

extension TickReport {
    var ran: Bool {
        if case .ran = outcome { return true }
        return false
    }

    var skipReason: SkipReason? {
        if case .skipped(let reason) = outcome { return reason }
        return nil
    }

    var windowRecord: BackgroundTaskRecord? {
        if case .ran(_, let window) = outcome { return window }
        return nil
    }
}

/// A handler that blocks until the test opens it, ignoring cancellation (a callback that misbehaves).
final class Gate: Sendable {
    private let state = Locked<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let open = state.withLock { state in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if open { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// Runs a scheduler in the background for the duration of a test.
func withRunning<T>(_ keepAlive: KeepAlive, _ body: () async throws -> T) async throws -> T {
    let task = Task { try await keepAlive.run() }
    do {
        let result = try await body()
        task.cancel()
        try? await task.value
        return result
    } catch {
        task.cancel()
        try? await task.value
        throw error
    }
}

/// Polls `condition` (state another thread changes: a timer thread, a launch reaching its gate) every millisecond
/// until it holds; gives up with a failure after `timeout` of real time, longer under a sanitizer (a give-up, not a
/// timing assertion: the whole suite runs at once on two cores, several times slower there).
func waitUntil(_ what: String, timeout: Duration = .seconds(30), _ condition: () -> Bool) async throws {
    let giveUp = ContinuousClock.now + timeout * Sanitizers.slowdown
    while !condition() {
        guard ContinuousClock.now < giveUp else {
            throw TestClock.WaitTimeout(description: "timed out waiting until \(what)")
        }
        try await Task.sleep(for: .milliseconds(1))
    }
}
