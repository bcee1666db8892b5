public import KeepAlive
import Basics

/// A power source a test switches by hand.
///
/// ```swift
/// let power = MockPowerSource()
/// let keepAlive = KeepAlive(clock: clock, powerSource: power)
/// power.set(.lowPower)   // the next deadline is recomputed at once
/// ```
public final class MockPowerSource: PowerSource {
    private let current: Locked<PowerState>
    private let broadcast = Broadcast<PowerState>()

    public init(_ initial: PowerState = .normal) {
        current = Locked(initial)
    }

    public var state: PowerState {
        current.withLock { $0 }
    }

    public func updates() -> AsyncStream<PowerState> {
        broadcast.subscribe()
    }

    /// Changes the state and tells every subscriber.
    public func set(_ state: PowerState) {
        current.withLock { $0 = state }
        broadcast.publish(state)
    }

    /// Whether anybody listens.
    public var hasSubscribers: Bool {
        broadcast.hasSubscribers
    }

    /// Waits until somebody subscribed (the scheduler subscribes when it starts running), so a test's flip is
    /// not lost. Bounded by a real-time `timeout`, after which it throws.
    public func waitForSubscriber(timeout: Duration = .seconds(30)) async throws {
        let deadline = ContinuousClock.now + timeout * safetyNetScale
        while !broadcast.hasSubscribers {
            guard ContinuousClock.now < deadline else {
                throw TestClock.WaitTimeout(
                    description: "MockPowerSource: nobody subscribed within \(timeout * safetyNetScale)")
            }
            // A short sleep, not `Task.yield()`: spinning kept a thread of a loaded pool from the very task that
            // was about to subscribe.
            try await Task.sleep(for: .milliseconds(1))
        }
    }
}

/// A deterministic generator (SplitMix64) for jitter and property tests: the package's one seeded generator,
/// ``SplitMix64``, under its public name.
public struct SeededRandomNumberGenerator: RandomNumberGenerator, Sendable {
    private var generator: SplitMix64

    public init(seed: UInt64) {
        generator = SplitMix64(seed: seed)
    }

    public mutating func next() -> UInt64 {
        generator.next()
    }
}
