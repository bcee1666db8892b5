/// A device's availability from its polls: a pure state machine, so that one lost poll does not flap it.
///
/// A device starts `unknown` (nothing published), becomes `online` at the first successful poll and goes
/// `offline` only after `threshold` consecutive failed polls (3 by default). Every successful poll resets the
/// count. ``record(succeeded:)`` returns the new availability when it changed, so the caller publishes only
/// changes (the retained copy on the broker holds the rest).
///
/// ```swift
/// var tracker = AvailabilityTracker(threshold: 3)
/// tracker.record(succeeded: true)   // .online
/// tracker.record(succeeded: false)  // nil (1 of 3)
/// ```
struct AvailabilityTracker: Sendable, Hashable {
    enum Availability: String, Sendable, Hashable {
        case online, offline
    }

    let threshold: Int
    private(set) var availability: Availability?
    private(set) var consecutiveFailures = 0

    /// `threshold` below 1 is treated as 1 (offline at the first failure).
    init(threshold: Int) {
        self.threshold = max(threshold, 1)
    }

    /// Records one poll's outcome; returns the availability when it changed.
    @discardableResult
    mutating func record(succeeded: Bool) -> Availability? {
        let next: Availability?
        if succeeded {
            consecutiveFailures = 0
            next = .online
        } else {
            consecutiveFailures += 1
            next = consecutiveFailures >= threshold ? .offline : availability
        }
        defer { availability = next }
        return next != availability ? next : nil
    }
}
