/// One registered callback and where it stands.
struct Registration {
    let token: RegistrationToken
    let name: String
    var baseInterval: Duration
    var budget: Duration
    /// The budget was given (``KeepAlive/RegistrationOptions/budget``), not derived from the interval.
    var explicitBudget = false
    /// The callback; `nil` when the gate hands each launch its work (``LaunchGate``).
    let work: LaunchWork?
    let onReport: (@Sendable (TickReport) -> Void)?
    /// What a launch waits for before its task exists (``LaunchGate``).
    var gate: (any LaunchGate)?
    let maxTicks: UInt64?
    /// `nil` until the scheduler starts.
    var schedule: RegistrationSchedule?
    /// Where placement put the grid: ticks on `epoch + phase + k·interval` (``KeepAlive/align(_:)``).
    var phase: Duration?
    var nextTick: UInt64 = 0
    var inFlight = false
    var consecutiveFailures = 0
    var backoffUntil: KeepAliveInstant?

    /// Fired all the ticks it was allowed (``KeepAlive/RegistrationOptions/maxTicks``).
    var isFinished: Bool {
        maxTicks.map { nextTick >= $0 } ?? false
    }
}

struct SeedCallback {
    let token: RegistrationToken
    let callback: @Sendable () async -> Void
}

/// The scheduler's state, only touched under its lock.
struct SchedulerState {
    var registrations: [RegistrationToken: Registration] = [:]
    var nextToken: UInt64 = 1
    var isRunning = false
    var stopRequested = false
    var power: PowerState
    var random: any RandomNumberGenerator & Sendable
    var seedCallback: SeedCallback?
    var statistics = KeepAlive.Statistics()
    var stopWaiters: [CheckedContinuation<Void, Never>] = []
    /// Windows begun whose report has not been delivered yet; `run()` returns only when it is zero, so every
    /// window's record is out before the scheduler says it has stopped.
    var unreportedLaunches = 0
    var reportWaiters: [CheckedContinuation<Void, Never>] = []
    var startedTask: Task<Void, Never>?
    /// When the running scheduler started: the origin phases are measured from.
    var epoch: KeepAliveInstant?

    init(power: PowerState, random: any RandomNumberGenerator & Sendable) {
        self.power = power
        self.random = random
    }

    mutating func jitter(upTo maximum: Duration) -> Duration {
        guard maximum > .zero else { return .zero }
        let nanoseconds = UInt64(clamping: maximum.attoseconds / 1_000_000_000)
        return .nanoseconds(Int64(clamping: UInt64.random(in: 0...nanoseconds, using: &random)))
    }
}

/// A callback the loop decided to run, carried out of the lock.
struct Launch {
    let token: RegistrationToken
    let name: String
    let tick: UInt64
    let scheduled: KeepAliveInstant
    let fired: KeepAliveInstant
    let interval: Duration
    let power: PowerState
    let budget: Duration
    let work: LaunchWork?
    let onReport: (@Sendable (TickReport) -> Void)?
    let gate: (any LaunchGate)?

    func report(_ outcome: TickReport.Outcome, detail: (any Sendable)? = nil) -> TickReport {
        TickReport(
            name: name,
            token: token,
            tick: tick,
            scheduled: scheduled,
            fired: fired,
            interval: interval,
            power: power,
            outcome: outcome,
            detail: detail
        )
    }
}
