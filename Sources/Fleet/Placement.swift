/// Who should hold a device: the scoring and the hysteresis rule, used alike between the gateways of a fleet and
/// between the adapters of one gateway.
///
/// In the spirit of Home Assistant's Bluetooth manager: signal decides, a candidate that has stopped hearing the
/// device does not count, and the current choice is kept unless another is better by a clear margin — here also
/// for a while (the dwell), so one lucky advertisement never moves a device.
public enum Placement {
    /// The score of a candidate in dB-equivalents, or nil when it cannot take the device: it no longer hears it,
    /// or has no free connection slot (a holder's own slot counts as free).
    ///
    /// A candidate whose recent polls all failed loses 40 dB, one that fails one poll in four loses 10 dB: enough
    /// that a gateway which hears the device well but cannot connect gives it to one that can.
    public static func score(rssi: Int?, successPermille: Int, freeSlots: Int) -> Int? {
        guard let rssi, freeSlots > 0 else { return nil }
        let failurePenalty = (1000 - min(max(successPermille, 0), 1000)) * 40 / 1000
        return rssi - failurePenalty
    }

    /// Orders candidates: higher score first, then the name, so every gateway ranks a set of reports the same way.
    public static func isBetter(_ left: (name: String, score: Int), than right: (name: String, score: Int)) -> Bool {
        left.score != right.score ? left.score > right.score : left.name < right.name
    }
}

/// The hysteresis of one placement decision: challengers must beat the incumbent by `marginDecibels` at every
/// evaluation for `dwellNanoseconds` before the incumbent gives way (to the best of them at that moment).
///
/// Why this cannot oscillate: a move happens only when the newcomer's score exceeds the incumbent's by the margin,
/// so while scores stand still each move raises the holder's score by at least the margin and the number of moves
/// is bounded by (score range) / margin; moving back would need the old holder to be better by the margin, which
/// contradicts the move. With noisy scores the same holds as long as the noise stays within half the margin.
public struct ChallengeTracker: Sendable, Equatable {
    public private(set) var challenger: String?
    public private(set) var since: FleetInstant?

    public init() {}

    public enum Decision: Equatable, Sendable {
        /// Nothing to do (no challenger better by the margin).
        case stay
        /// A challenger is better by the margin; decide again at this instant if nothing changes.
        case wait(until: FleetInstant)
        /// Give the device to this challenger.
        case move(to: String)
    }

    /// - Parameters:
    ///   - incumbent: the current choice's score, or nil when it can no longer take the device (then any
    ///     challenger wins at once: there is nothing to protect from ping-pong).
    ///   - best: the best other candidate, if any.
    public mutating func evaluate(
        incumbent: Int?, best: (name: String, score: Int)?, marginDecibels: Int, dwellNanoseconds: Int64,
        now: FleetInstant
    ) -> Decision {
        guard let best else {
            self = ChallengeTracker()
            return .stay
        }
        guard let incumbent else {
            self = ChallengeTracker()
            return .move(to: best.name)
        }
        guard best.score >= incumbent + marginDecibels else {
            self = ChallengeTracker()
            return .stay
        }
        // The dwell runs while *some* challenger is better by the margin, and the best one at its end wins: two
        // near-equal challengers trading first place must not restart it forever.
        challenger = best.name
        if since == nil { since = now }
        let deadline = (since ?? now) + dwellNanoseconds
        if now >= deadline {
            self = ChallengeTracker()
            return .move(to: best.name)
        }
        return .wait(until: deadline)
    }
}
