public import KeepAlive
import Locking

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
    public func waitForSubscriber(timeout: Duration = .seconds(10)) async throws {
        let deadline = ContinuousClock.now + timeout
        while !broadcast.hasSubscribers {
            guard ContinuousClock.now < deadline else {
                throw TestClock.WaitTimeout(description: "MockPowerSource: nobody subscribed within \(timeout)")
            }
            await Task.yield()
        }
    }
}

/// A deterministic generator (SplitMix64) for jitter and property tests.
public struct SeededRandomNumberGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
