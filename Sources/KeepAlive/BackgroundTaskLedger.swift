public import Logging
import Basics

/// Keeps every bounded background window: the Linux analogue of iOS's `beginBackgroundTask(withName:
/// expirationHandler:)`, `endBackgroundTask(_:)` and `backgroundTimeRemaining`.
///
/// Each window has a budget. When less than the warning lead is left the ledger emits a warning; at the
/// deadline it runs the expiration handler once and cancels the window's task; if the owner still has not
/// ended it a grace later, the ledger force-ends it and logs an error (where iOS would kill the app). A bounded
/// history remembers how every window ended.
///
/// ```swift
/// let ledger = BackgroundTaskLedger(clock: TimerFDClock(), logger: logger)
/// let id = ledger.begin(name: "greenhouse-3", budget: .seconds(20)) {
///     logger.warning("out of time: wrap up")
/// }
/// defer { ledger.end(id) }
/// ```
///
/// Thread-safe; `begin` and `end` are synchronous and cheap (one lock, no allocation beyond the entry). One
/// driver task, started on demand while windows are open, sleeps until the next warning, deadline or grace.
public final class BackgroundTaskLedger: Sendable {
    public struct Configuration: Sendable {
        /// How long after its deadline an expired window may still end itself before it is force-ended.
        public var gracePeriod: Duration = .seconds(2)
        /// How long before the deadline the warning fires; `nil` means the smaller of 10 s and a third of the
        /// window's budget.
        public var warningLead: Duration?
        /// How many ended windows the history keeps (oldest dropped first).
        public var historyCapacity: Int = 1_024

        public init(gracePeriod: Duration = .seconds(2), warningLead: Duration? = nil, historyCapacity: Int = 1_024) {
            self.gracePeriod = gracePeriod
            self.warningLead = warningLead
            self.historyCapacity = historyCapacity
        }

        /// The grace period not negative, the warning lead (when set) not negative, the history at least one entry.
        public func validate(field: String = "BackgroundTaskLedger.Configuration") throws(ConfigurationValueError) {
            guard gracePeriod >= .zero else {
                throw ConfigurationValueError(
                    field: "\(field).gracePeriod", reason: "must not be negative, not \(gracePeriod.compact)")
            }
            if let warningLead, warningLead < .zero {
                throw ConfigurationValueError(
                    field: "\(field).warningLead", reason: "must not be negative, not \(warningLead.compact)")
            }
            guard historyCapacity > 0 else {
                throw ConfigurationValueError(
                    field: "\(field).historyCapacity", reason: "must be at least 1, not \(historyCapacity)")
            }
        }

        func warningLead(forBudget budget: Duration) -> Duration {
            warningLead ?? min(.seconds(10), budget / 3)
        }
    }

    /// Hooks the scheduler and `withBackgroundTask` attach to a window beside the public expiration handler.
    package struct Hooks: Sendable {
        /// Cancels the task doing the window's work (called at expiry, once).
        package var cancel: (@Sendable () -> Void)?
        /// Told when the ledger force-ends the window, so a waiter can stop waiting for a stuck body.
        package var forcedEnd: (@Sendable (BackgroundTaskRecord) -> Void)?
        /// Where the driver runs if this window starts it: the executor the window's work runs on (the D-Bus
        /// connection's thread), so that starting the driver and ringing it from there wakes no other thread.
        /// `nil`: the default executor.
        package var driverExecutor: (any TaskExecutor)?

        package init(
            cancel: (@Sendable () -> Void)? = nil, forcedEnd: (@Sendable (BackgroundTaskRecord) -> Void)? = nil,
            driverExecutor: (any TaskExecutor)? = nil
        ) {
            self.cancel = cancel
            self.forcedEnd = forcedEnd
            self.driverExecutor = driverExecutor
        }
    }

    package let configuration: Configuration
    package let time: TimeBase
    let logger: Logger
    let state: Locked<LedgerState>
    let alarm: Alarm
    let broadcast = Broadcast<BackgroundTaskEvent>()

    public convenience init(
        configuration: Configuration = Configuration(),
        clock: any Clock<Duration> = TimerFDClock(),
        logger: Logger = Logger(label: "keepalive.ledger")
    ) throws(ConfigurationValueError) {
        try configuration.validate()
        self.init(configuration: configuration, time: TimeBase(clock), logger: logger)
    }

    package init(configuration: Configuration, time: TimeBase, logger: Logger) {
        self.configuration = configuration
        self.time = time
        self.logger = logger
        self.alarm = Alarm(time: time)
        self.state = Locked(LedgerState(historyCapacity: configuration.historyCapacity))
    }

    deinit {
        broadcast.finish()
    }

    // MARK: Begin and end

    /// Opens a window of `budget` and returns its id, or ``BackgroundTaskID/invalid`` when the ledger is closed.
    ///
    /// `expirationHandler` runs once, at the deadline (or when the ledger expires windows early for shutdown or
    /// sleep). It must be quick; end the window from your work, not from the handler, if the work can still
    /// finish within the grace.
    public func begin(
        name: String,
        budget: Duration,
        expirationHandler: (@Sendable () -> Void)? = nil
    ) -> BackgroundTaskID {
        begin(name: name, budget: budget, expirationHandler: expirationHandler, hooks: Hooks())
    }

    package func begin(
        name: String,
        budget: Duration,
        expirationHandler: (@Sendable () -> Void)?,
        hooks: Hooks
    ) -> BackgroundTaskID {
        // A window with no time at all is not a programmer's error to trap on: like iOS with no background time
        // left, it begins already at its deadline, so its expiration handler runs at once and it is recorded.
        let budget = max(budget, .nanoseconds(1))
        let now = time.now
        let lead = configuration.warningLead(forBudget: budget)
        let result: LedgerState.BeginResult = state.withLock { state in
            state.begin(
                name: name,
                budget: budget,
                now: now,
                warningLead: lead,
                expirationHandler: expirationHandler,
                hooks: hooks
            )
        }
        switch result {
        case .refused(let record):
            logger.notice(
                "background task refused: the ledger is closed",
                metadata: ["task": "\(name)"]
            )
            broadcast.publish(.ended(record))
            return .invalid
        case .began(let entry, let startDriver, let ringDriver):
            logger.trace("background task began", metadata: ["task": "\(name)", "id": "\(entry.id)"])
            if broadcast.hasSubscribers { broadcast.publish(.began(entry)) }
            if startDriver {
                Task(executorPreference: hooks.driverExecutor) { await self.drive() }
            } else if ringDriver {
                alarm.ring()
            }
            return entry.id
        }
    }

    /// Ends a window. Idempotent: ending it again, or ending ``BackgroundTaskID/invalid``, does nothing; an id
    /// this ledger never issued is logged. Returns the history record when this call ended the window.
    @discardableResult
    public func end(_ id: BackgroundTaskID) -> BackgroundTaskRecord? {
        guard id != .invalid else { return nil }
        let now = time.now
        let result = state.withLock { $0.end(id, now: now, forced: false) }
        switch result {
        case .ended(let record, let waiters, let wakeDriver):
            logger.trace(
                "background task ended",
                metadata: ["task": "\(record.name)", "id": "\(id)", "outcome": "\(record.outcome.rawValue)"]
            )
            if broadcast.hasSubscribers { broadcast.publish(.ended(record)) }
            for waiter in waiters { waiter.resume() }
            if wakeDriver { alarm.ring() }
            return record
        case .alreadyEnded:
            logger.trace("background task already ended", metadata: ["id": "\(id)"])
            return nil
        case .unknown:
            logger.warning("end called with a background task id this ledger never issued", metadata: ["id": "\(id)"])
            return nil
        }
    }

    // MARK: Time remaining

    /// Time left before the window's deadline (zero once it passed); `nil` when the window is not open.
    public func timeRemaining(_ id: BackgroundTaskID) -> Duration? {
        let now = time.now
        return state.withLock { state in
            state.open[id].map { max(.zero, now.duration(to: $0.entry.deadline)) }
        }
    }

    /// The least time remaining among the open windows, or `nil` when none is open
    /// (`UIApplication.backgroundTimeRemaining`).
    public var backgroundTimeRemaining: Duration? {
        let now = time.now
        return state.withLock { state in
            state.open.values.map(\.entry.deadline).min().map { max(.zero, now.duration(to: $0)) }
        }
    }

    /// The windows open now, oldest first.
    public var openEntries: [BackgroundTaskEntry] {
        state.withLock { state in state.open.values.map(\.entry) }.sorted { $0.id < $1.id }
    }

    public var openCount: Int {
        state.withLock { $0.open.count }
    }

    // MARK: History

    /// Ended windows, oldest first (at most `historyCapacity`).
    public func history() -> [BackgroundTaskRecord] {
        state.withLock { $0.history.elements }
    }

    /// Ended windows of one name, oldest first: "why didn't device X poll?".
    public func history(named name: String) -> [BackgroundTaskRecord] {
        state.withLock { $0.history.elements.filter { $0.name == name } }
    }

    /// Everything the ledger reports from now on, in order.
    public func events() -> AsyncStream<BackgroundTaskEvent> {
        broadcast.subscribe()
    }
}
