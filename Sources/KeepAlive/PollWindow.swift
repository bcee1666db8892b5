/// The bounded window one callback runs in: its ledger entry, seen from inside.
///
/// ```swift
/// keepAlive.register(name: "co2") { window in
///     guard window.timeRemaining > .seconds(2) else { return .noData }
///     return try await sensor.read() ? .newData : .noData
/// }
/// ```
public struct PollWindow: Sendable {
    public let id: BackgroundTaskID
    public let name: String
    /// The scheduler's tick number for this registration (0 for the first), or 0 outside the scheduler.
    public let tick: UInt64
    public let began: KeepAliveInstant
    public let budget: Duration
    public let deadline: KeepAliveInstant
    let ledger: BackgroundTaskLedger

    package init(entry: BackgroundTaskEntry, tick: UInt64, ledger: BackgroundTaskLedger) {
        self.id = entry.id
        self.name = entry.name
        self.tick = tick
        self.began = entry.began
        self.budget = entry.budget
        self.deadline = entry.deadline
        self.ledger = ledger
    }

    /// Time left before the deadline; zero once it passed or the window ended.
    public var timeRemaining: Duration {
        ledger.timeRemaining(id) ?? .zero
    }

    /// True once the deadline passed or the ledger expired the window early.
    public var isExpired: Bool {
        timeRemaining == .zero || ledger.state.withLock { $0.open[id]?.entry.phase == .expired }
    }

    /// The clock the window is measured on, for sleeping inside it.
    package var time: TimeBase { ledger.time }
}

/// What a keep-alive callback reports, like `UIBackgroundFetchResult`.
public enum PollResult: Sendable {
    case newData
    case noData
    case failed(any Error)

    public var isFailure: Bool {
        if case .failed = self { return true }
        return false
    }

    /// `newData`, `noData` or `failed`: the names the output and logs use.
    public var name: String {
        switch self {
        case .newData: "newData"
        case .noData: "noData"
        case .failed: "failed"
        }
    }
}
