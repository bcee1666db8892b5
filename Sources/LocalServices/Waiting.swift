import Basics

/// How the launchers wait for what they start (a bus's address, a port that accepts): polling a condition with a
/// deadline, never a fixed sleep. The tests use it too.

/// A condition did not hold, or a body did not finish, within its safety-net timeout.
public struct TimedOut: Error, Sendable, CustomStringConvertible {
    public var what: String
    public init(what: String) { self.what = what }
    public var description: String { "timed out waiting until \(what)" }
}

/// Polls `condition` every few milliseconds until it holds; throws `TimedOut` after `timeout`.
///
/// ```swift
/// try await waitUntil("the service has the call") { await service.calls == 1 }
/// ```
public func waitUntil(
    _ what: String, timeout: Duration = .seconds(30), _ condition: @Sendable () async throws -> Bool
) async throws {
    let clock = ContinuousClock()
    // A give-up, not a timing assertion: under a sanitizer everything runs several times slower, and the whole
    // suite runs at once on two cores (an ASan run took more than 10 s for a sysfs source's first reading, and so
    // did a plain run in its first seconds, when every suite starts at once: hence 30 s).
    let deadline = clock.now + timeout * Sanitizers.slowdown
    while try await !condition() {
        guard clock.now < deadline else { throw TimedOut(what: what) }
        try await Task.sleep(for: .milliseconds(5))
    }
}
