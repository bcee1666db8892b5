public import KeepAlive
/// How the poll engine retries transient failures inside one window.
///
/// Delays grow like bleak-retry-connector's (0.1, 0.25, 0.5, 1, 2 s, then 2 s each); permanent errors are
/// never retried; a retry happens only if the window still has room for the delay plus `minimumAttemptTime`.
public struct RetryPolicy: Sendable, Hashable {
    public var delays: [Duration]
    /// Attempts per window, the first included.
    public var maxAttempts: Int
    /// A retry is skipped when less than this would be left after its delay.
    public var minimumAttemptTime: Duration

    public init(
        delays: [Duration] = [.milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2)],
        maxAttempts: Int = 6,
        minimumAttemptTime: Duration = .seconds(1)
    ) {
        self.delays = delays
        self.maxAttempts = maxAttempts
        self.minimumAttemptTime = minimumAttemptTime
    }

    /// At least one delay, every delay positive, at least one attempt.
    public func validate(field: String = "RetryPolicy") throws(ConfigurationValueError) {
        guard !delays.isEmpty else {
            throw ConfigurationValueError(field: "\(field).delays", reason: "needs at least one delay")
        }
        if let index = delays.firstIndex(where: { $0 <= .zero }) {
            throw ConfigurationValueError(
                field: "\(field).delays[\(index)]", reason: "must be positive, not \(delays[index].compact)")
        }
        guard maxAttempts >= 1 else {
            throw ConfigurationValueError(
                field: "\(field).maxAttempts", reason: "must be at least 1, not \(maxAttempts)")
        }
    }

    /// The delay before attempt `attempt + 1`, or `nil` when no further attempt is allowed.
    public func delay(afterAttempt attempt: Int) -> Duration? {
        guard attempt < maxAttempts else { return nil }
        return delays[min(attempt - 1, delays.count - 1)]
    }

    public static let standard = RetryPolicy()
    public static let never = RetryPolicy(maxAttempts: 1)
}
