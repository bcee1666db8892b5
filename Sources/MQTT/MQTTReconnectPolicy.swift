/// When to try again after a lost connection: a pure value, tested on plain numbers.
///
/// The delay before attempt `n` (0-based, counted since the last successful CONNACK) is
/// `min(initial × 2ⁿ, maximum)`, jittered by ±`jitter` (default ±20 %) with the injected random number
/// generator: 1 s, 2 s, 4 s … 60 s, each somewhere in [80 %, 120 %] of its value, so that a fleet of daemons
/// that lost the broker together does not come back in one burst.
///
/// ```swift
/// var random = SystemRandomNumberGenerator()
/// let delay = MQTTReconnectPolicy().delay(beforeAttempt: 3, using: &random)  // 6.4 s … 9.6 s
/// ```
public struct MQTTReconnectPolicy: Sendable, Hashable {
    public var initialDelay: Duration
    public var maximumDelay: Duration
    /// The relative jitter, 0 … 1 (0.2: ±20 %).
    public var jitter: Double

    public init(initialDelay: Duration = .seconds(1), maximumDelay: Duration = .seconds(60), jitter: Double = 0.2) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.jitter = min(max(jitter, 0), 1)
    }

    /// The delay before the base value is jittered.
    public func baseDelay(beforeAttempt attempt: Int) -> Duration {
        var delay = initialDelay
        var step = 0
        while step < attempt, delay < maximumDelay {
            delay *= 2
            step += 1
        }
        return min(delay, maximumDelay)
    }

    /// The jittered delay before attempt `attempt` (0-based).
    public func delay(beforeAttempt attempt: Int, using random: inout some RandomNumberGenerator) -> Duration {
        let base = baseDelay(beforeAttempt: attempt)
        guard jitter > 0 else { return base }
        let factor = Double.random(in: (1 - jitter)...(1 + jitter), using: &random)
        return base * factor
    }
}
