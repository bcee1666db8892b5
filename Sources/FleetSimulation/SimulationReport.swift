/// What one run showed. A run passes when `violations` is empty.
public struct SimulationReport: Sendable, CustomStringConvertible {
    public var seed: UInt64
    public var gateways: Int
    public var devices: Int
    public var steps = 0
    /// Broken invariants, each with the virtual instant and who was involved (only the first few are kept).
    public var violations: [String] = []
    public var violationCount = 0
    /// The longest time a device waited for a holder while a live, connected gateway could reach it.
    public var maximumHandoverNanoseconds: Int64 = 0
    /// The liveness bound the run checked against: lease × (1 + ρ) + one poll interval.
    public var handoverBoundNanoseconds: Int64 = 0
    public var handovers = 0
    public var placementMoves = 0
    /// Placement moves after the convergence instant (faults over, one dwell and report period later): must be 0.
    public var movesAfterConvergence = 0
    /// At the end: devices held by their best gateway (by true RSSI), within the margin, and not held at all.
    public var heldByBest = 0
    public var heldWithinMargin = 0
    public var unheldAtEnd = 0
    public var kills = 0
    public var partitions = 0
    public var brokerRestarts = 0
    /// Own lease messages that came back rejected (lost a race), by kind.
    public var rejectedOwnMessages: [String: Int] = [:]
    /// Payloads or topics the state machines refused (must stay 0: the simulator sends only valid ones).
    public var malformed = 0
    public var echoTimeouts = 0
    public var publishes = 0

    public var passed: Bool { violationCount == 0 }

    public var description: String {
        let handover = Double(maximumHandoverNanoseconds) / 1e9
        let bound = Double(handoverBoundNanoseconds) / 1e9
        return "seed \(seed) \(gateways)×\(devices): \(steps) steps, \(publishes) publishes, "
            + "max handover \(handover) s (bound \(bound) s) over \(handovers) handovers, "
            + "\(placementMoves) moves (\(movesAfterConvergence) after convergence), "
            + "best \(heldByBest) within-margin \(heldWithinMargin) unheld \(unheldAtEnd), "
            + """
                faults k\(kills) p\(partitions) b\(brokerRestarts), rejected own \
                \(rejectedOwnMessages.sorted { $0.key < $1.key }), 
                """
            + "malformed \(malformed), echo timeouts \(echoTimeouts), "
            + "violations \(violationCount)" + (violations.isEmpty ? "" : ": " + violations.joined(separator: "; "))
    }
}
