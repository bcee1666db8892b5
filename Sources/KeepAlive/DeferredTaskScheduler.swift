public import Logging
public import ServiceLifecycle
import Basics

#if canImport(Glibc)
    import Glibc
#endif

/// Runs work once, later, when conditions hold: iOS's `BGTaskScheduler`, beside the periodic ``KeepAlive``
/// scheduler and in windows of its ledger.
///
/// The app registers a handler per identifier, then submits requests (``DeferredTaskRequest``): not before an
/// earliest begin, only while the network or external power it requires is there. Each run is a window of the
/// request's budget in the ``KeepAlive/ledger`` (with its expiration handler, and a forced end past the grace), and
/// at most one run of an identifier is under way at a time; a request naming a device holds it in the
/// ``DeviceGate`` the polls use. A run that fails is submitted again with backoff (doubling from
/// ``Configuration/retryDelay``), at most ``Configuration/maxAttempts`` times in all. With a store the pending
/// requests survive a restart.
///
/// ```swift
/// let scheduler = try DeferredTaskScheduler(keepAlive: keepAlive, network: broker.connected, store: store)
/// try scheduler.register("history.fern", kind: .processing) { task in
///     try await downloadHistory(within: task.window)
/// }
/// try scheduler.submit(DeferredTaskRequest(identifier: "history.fern", kind: .processing, requiresNetwork: true))
/// try await scheduler.run()      // or in a ServiceGroup, beside the KeepAlive
/// ```
public final class DeferredTaskScheduler: Service, Sendable {
    public struct Configuration: Sendable, Hashable {
        /// The wait before the first retry of a failed run; it doubles with each failure in a row.
        public var retryDelay: Duration
        /// The longest wait between two attempts.
        public var maxRetryDelay: Duration
        /// Runs of one request in all (the first and its retries); then it is dropped, and said so.
        public var maxAttempts: Int
        /// Processing tasks under way at once (refresh tasks are not limited).
        public var maxConcurrentProcessing: Int

        public init(
            retryDelay: Duration = .seconds(60), maxRetryDelay: Duration = .seconds(3_600), maxAttempts: Int = 5,
            maxConcurrentProcessing: Int = 1
        ) {
            self.retryDelay = retryDelay
            self.maxRetryDelay = maxRetryDelay
            self.maxAttempts = maxAttempts
            self.maxConcurrentProcessing = maxConcurrentProcessing
        }

        public func validate() throws(ConfigurationValueError) {
            let field = "DeferredTaskScheduler.Configuration"
            guard retryDelay > .zero, maxRetryDelay >= retryDelay else {
                throw ConfigurationValueError(
                    field: field + ".retryDelay", reason: "must be more than 0 and at most maxRetryDelay")
            }
            guard maxAttempts >= 1 else {
                throw ConfigurationValueError(field: field + ".maxAttempts", reason: "must be at least 1")
            }
            guard maxConcurrentProcessing >= 1 else {
                throw ConfigurationValueError(field: field + ".maxConcurrentProcessing", reason: "must be at least 1")
            }
        }
    }

    /// A condition a request waits for.
    public enum Requirement: String, Sendable, Hashable, CaseIterable {
        case network
        case externalPower
    }

    /// Where a pending request stands.
    public enum Status: Sendable, Hashable {
        /// Its handler is not registered (yet): it waits for ``register(_:kind:handler:)``.
        case unregistered
        /// Not before this instant (its earliest begin, or its retry after a failure).
        case waiting(until: KeepAliveInstant, failures: Int)
        /// Due, and held until these conditions hold.
        case held([Requirement])
        /// Due, conditions met, waiting for another processing task to end.
        case queued
        /// Under way: its attempt, and when its window began.
        case running(attempt: Int, since: KeepAliveInstant)
    }

    /// What happened, for logs, tests and "why did it not run?".
    public enum Event: Sendable, Hashable {
        case submitted(String)
        case started(String, attempt: Int)
        case succeeded(String, attempt: Int)
        /// A run failed; `retryAt` is when it is tried again, `nil` when it was the last attempt.
        case failed(DeferredTaskError, attempt: Int, retryAt: KeepAliveInstant?)
        /// A run did not happen or was cut short by a shutdown or a closed ledger: the request waits, as it was.
        case interrupted(String)
        case cancelled(String)
    }

    private struct Handler {
        var kind: DeferredTaskRequest.Kind
        var body: @Sendable (DeferredTask) async throws -> Void
    }

    private struct Pending {
        var request: DeferredTaskRequest
        var failures: Int
        /// Submission order: among due requests the older goes first.
        var order: UInt64
    }

    private struct Running {
        var request: DeferredTaskRequest
        var order: UInt64
        var attempt: Int
        var kind: DeferredTaskRequest.Kind
        var since: KeepAliveInstant
    }

    private struct State {
        var handlers: [String: Handler] = [:]
        var pending: [String: Pending] = [:]
        var running: [String: Running] = [:]
        var nextOrder: UInt64 = 0
        var stopping = false

        var processingRunning: Int { running.values.count { $0.kind == .processing } }
    }

    private struct Start: Sendable {
        var request: DeferredTaskRequest
        var attempt: Int
        var body: @Sendable (DeferredTask) async throws -> Void
    }

    private enum Outcome {
        case succeeded
        case failed(DeferredTaskError)
        case interrupted(String)
    }

    public let configuration: Configuration
    private let keepAlive: KeepAlive
    private let network: (any DeferredTaskCondition)?
    private let externalPower: ExternalPowerCondition
    private let gate: DeviceGate?
    private let store: (any DeferredTaskStore)?
    private let wallClock: @Sendable () -> Duration
    private let logger: Logger
    private let state = Locked(State())
    private let saving = Locked(())
    private let alarm: Alarm
    private let broadcast = Broadcast<Event>()

    /// A scheduler whose runs are windows of `keepAlive`'s ledger, on its clock; external power is what its power
    /// source says. `network`: what ``DeferredTaskRequest/requiresNetwork`` waits for (without one, that
    /// requirement always holds). `gate`: the device gate of the polls (``DeferredTaskRequest/device``). `store`:
    /// where pending requests are kept; they are loaded here (a store that cannot be read is logged, and the
    /// scheduler starts with none). `wallClock`: since the Unix epoch, for the store.
    public init(
        keepAlive: KeepAlive, configuration: Configuration = Configuration(),
        network: (any DeferredTaskCondition)? = nil, gate: DeviceGate? = nil, store: (any DeferredTaskStore)? = nil,
        wallClock: (@Sendable () -> Duration)? = nil,
        logger: Logger? = nil
    ) throws(ConfigurationValueError) {
        try configuration.validate()
        self.configuration = configuration
        self.keepAlive = keepAlive
        self.network = network
        self.externalPower = ExternalPowerCondition(keepAlive.powerSource)
        self.gate = gate
        self.store = store
        self.wallClock = wallClock ?? { .nanoseconds(clockNanoseconds(CLOCK_REALTIME)) }
        self.logger = logger ?? keepAlive.logger
        self.alarm = Alarm(time: keepAlive.time)
        load()
    }

    deinit {
        broadcast.finish()
    }

    /// The scheduler's clock now (``DeferredTaskRequest/earliestBegin`` is on it).
    public var now: KeepAliveInstant { keepAlive.time.now }

    // MARK: Registering and submitting

    /// Registers the handler of `identifier`'s runs. Return when the work is done; throw (or call
    /// ``DeferredTask/setTaskCompleted(success:)`` with `false`) when it failed. At the budget the handler's task is
    /// cancelled.
    public func register(
        _ identifier: String, kind: DeferredTaskRequest.Kind,
        handler: @escaping @Sendable (DeferredTask) async throws -> Void
    ) throws(DeferredTaskError) {
        let added = state.withLock { state in
            guard state.handlers[identifier] == nil else { return false }
            state.handlers[identifier] = Handler(kind: kind, body: handler)
            return true
        }
        guard added else {
            throw DeferredTaskError(.alreadyRegistered, identifier: identifier, "a handler is already registered")
        }
        alarm.ring()
    }

    /// Submits `request`, replacing a pending one of its identifier (a run under way goes on; this one waits
    /// for it to end).
    public func submit(_ request: DeferredTaskRequest) throws(DeferredTaskError) {
        do {
            try request.validate()
        } catch {
            throw DeferredTaskError(.invalid, identifier: request.identifier, error.description)
        }
        let refusal = state.withLock { state -> DeferredTaskError? in
            guard let handler = state.handlers[request.identifier] else {
                return DeferredTaskError(
                    .unregistered, identifier: request.identifier, "no handler is registered for it")
            }
            guard handler.kind == request.kind else {
                return DeferredTaskError(
                    .invalid, identifier: request.identifier,
                    "its handler is registered for \(handler.kind) tasks, not \(request.kind)")
            }
            state.pending[request.identifier] = Pending(request: request, failures: 0, order: state.nextOrder)
            state.nextOrder += 1
            return nil
        }
        if let refusal { throw refusal }
        save()
        broadcast.publish(.submitted(request.identifier))
        alarm.ring()
    }

    /// Withdraws the pending request of `identifier`, if any (a run under way goes on).
    public func cancel(_ identifier: String) {
        let removed = state.withLock { $0.pending.removeValue(forKey: identifier) != nil }
        guard removed else { return }
        save()
        broadcast.publish(.cancelled(identifier))
    }

    public func cancelAll() {
        let identifiers = state.withLock { state in
            defer { state.pending = [:] }
            return Array(state.pending.keys)
        }
        guard !identifiers.isEmpty else { return }
        save()
        for identifier in identifiers.sorted() { broadcast.publish(.cancelled(identifier)) }
    }

    /// The pending requests, oldest first (iOS's `getPendingTaskRequests`).
    public var pendingRequests: [DeferredTaskRequest] {
        state.withLock { state in state.pending.values.sorted { $0.order < $1.order }.map(\.request) }
    }

    /// Where `identifier` stands, or `nil` when nothing is pending or under way for it.
    public func status(of identifier: String) -> Status? {
        let now = self.now
        return state.withLock { state -> Status? in
            if let running = state.running[identifier] {
                return .running(attempt: running.attempt, since: running.since)
            }
            guard let pending = state.pending[identifier] else { return nil }
            guard state.handlers[identifier] != nil else { return .unregistered }
            if let earliest = pending.request.earliestBegin, earliest > now {
                return .waiting(until: earliest, failures: pending.failures)
            }
            let unmet = unmetRequirements(of: pending.request)
            if !unmet.isEmpty { return .held(unmet) }
            return .queued
        }
    }

    /// Every event from now on (a slow reader keeps the newest 4,096).
    public func events() -> AsyncStream<Event> {
        broadcast.subscribe()
    }

    // MARK: Running

    /// Starts due requests until cancelled or shut down gracefully, then waits for the runs under way (each is
    /// bounded by its window and the ledger's grace; a shutdown of the ``KeepAlive`` expires them). A run cut short
    /// this way stays pending as it was.
    public func run() async throws {
        let watchers = [network?.changes(), externalPower.changes()].compactMap { $0 }.map { changes in
            Task { [alarm] in
                for await _ in changes { alarm.ring() }
            }
        }
        defer { for watcher in watchers { watcher.cancel() } }
        state.withLock { $0.stopping = false }
        await withTaskCancellationHandler {
            await runLoop()
        } onCancel: { [state] in
            // Before the runs see their cancellation: they end as interrupted, not failed.
            state.withLock { $0.stopping = true }
        }
    }

    private func runLoop() async {
        await withDiscardingTaskGroup { group in
            await withGracefulShutdownHandler {
                while !Task.isCancelled, !state.withLock({ $0.stopping }) {
                    let (starts, wakeAt) = takeDue()
                    for start in starts {
                        group.addTask { await self.execute(start) }
                    }
                    await alarm.wait(until: wakeAt)
                }
            } onGracefulShutdown: { [state, alarm] in
                state.withLock { $0.stopping = true }
                alarm.ring()
            }
            state.withLock { $0.stopping = true }
        }
    }

    /// The requests to start now (marked running), and when to look again (`nil`: only when rung).
    private func takeDue() -> ([Start], KeepAliveInstant?) {
        let now = self.now
        return state.withLock { state in
            var starts: [Start] = []
            var wakeAt: KeepAliveInstant?
            for pending in state.pending.values.sorted(by: { $0.order < $1.order }) {
                let identifier = pending.request.identifier
                guard state.running[identifier] == nil, let handler = state.handlers[identifier] else { continue }
                if let earliest = pending.request.earliestBegin, earliest > now {
                    wakeAt = min(wakeAt ?? earliest, earliest)
                    continue
                }
                guard unmetRequirements(of: pending.request).isEmpty else { continue }
                if pending.request.kind == .processing,
                    state.processingRunning >= configuration.maxConcurrentProcessing
                {
                    continue
                }
                state.pending[identifier] = nil
                state.running[identifier] = Running(
                    request: pending.request, order: pending.order, attempt: pending.failures + 1,
                    kind: pending.request.kind, since: now)
                starts.append(Start(request: pending.request, attempt: pending.failures + 1, body: handler.body))
            }
            return (starts, wakeAt)
        }
    }

    private func unmetRequirements(of request: DeferredTaskRequest) -> [Requirement] {
        var unmet: [Requirement] = []
        if request.requiresNetwork, let network, !network.isSatisfied { unmet.append(.network) }
        if request.requiresExternalPower, !externalPower.isSatisfied { unmet.append(.externalPower) }
        return unmet
    }

    /// One run: the device first (when the request names one), then the window.
    private func execute(_ start: Start) async {
        let identifier = start.request.identifier
        broadcast.publish(.started(identifier, attempt: start.attempt))
        logger.info(
            "deferred task started",
            metadata: ["task": "\(identifier)", "attempt": "\(start.attempt)", "budget": "\(start.request.budget)"])
        let outcome: Outcome
        do {
            if let device = start.request.device, let gate {
                outcome = try await gate.withDevice(device, holder: "deferred task \(identifier)") {
                    await self.runWindow(start)
                }
            } else {
                outcome = await runWindow(start)
            }
        } catch {
            outcome = .interrupted("shutting down while waiting for the device")
        }
        finish(start, outcome)
    }

    private func runWindow(_ start: Start) async -> Outcome {
        let identifier = start.request.identifier
        let current = Locked<DeferredTask?>(nil)
        do {
            let completion = try await keepAlive.ledger.withBackgroundTask(
                name: "deferred \(identifier)", budget: start.request.budget,
                expirationHandler: { current.withLock { $0 }?.expire() }
            ) { window in
                let task = DeferredTask(request: start.request, attempt: start.attempt, window: window)
                current.withLock { $0 = task }
                do {
                    try await start.body(task)
                } catch {
                    // What `setTaskCompleted` said first still decides.
                    if task.completion == nil { throw error }
                }
                return task.completion ?? true
            }
            if completion { return .succeeded }
            return .failed(DeferredTaskError(.failed, identifier: identifier, "the handler completed it with failure"))
        } catch let error as BackgroundTaskError where error.code == .refused {
            return .interrupted("the ledger is closed (shutting down or going to sleep)")
        } catch is BackgroundTaskError {  // the other code: a forced end
            return .failed(
                DeferredTaskError(
                    .forcedEnd, identifier: identifier,
                    "the handler ignored its expiry past the ledger's grace (budget \(start.request.budget.compact))"))
        } catch {
            // A shutdown or a sleep expires the windows and cancels the runs: the request waits, as it was.
            if state.withLock({ $0.stopping }) {
                return .interrupted("the scheduler stopped")
            }
            if !keepAlive.ledger.isOpen {
                return .interrupted("the ledger closed (shutting down or going to sleep)")
            }
            if current.withLock({ $0 })?.isExpired == true {
                return .failed(
                    DeferredTaskError(
                        .expired, identifier: identifier,
                        "out of time: the budget (\(start.request.budget.compact)) ran out before it finished"))
            }
            return .failed(DeferredTaskError(.failed, identifier: identifier, "\(error)"))
        }
    }

    private func finish(_ start: Start, _ outcome: Outcome) {
        let identifier = start.request.identifier
        let now = self.now
        let retryAt: KeepAliveInstant? = state.withLock { state in
            state.running[identifier] = nil
            // A newer request came while this one ran: it replaces this one whatever happened.
            guard state.pending[identifier] == nil else { return nil }
            switch outcome {
            case .succeeded:
                return nil
            case .interrupted:
                let failures = start.attempt - 1
                var request = start.request
                if !state.stopping {
                    // The ledger is closed for a while (a sleep coming, a shutdown): look again in a few seconds,
                    // not at once and again and again.
                    let later = now + Self.closedLedgerPause
                    request.earliestBegin = max(request.earliestBegin ?? later, later)
                }
                state.pending[identifier] = Pending(request: request, failures: failures, order: state.nextOrder)
                state.nextOrder += 1
                return nil
            case .failed:
                guard start.attempt < configuration.maxAttempts else { return nil }
                let retryAt = now + backoff(afterFailures: start.attempt)
                var request = start.request
                request.earliestBegin = retryAt
                state.pending[identifier] = Pending(request: request, failures: start.attempt, order: state.nextOrder)
                state.nextOrder += 1
                return retryAt
            }
        }
        save()
        switch outcome {
        case .succeeded:
            logger.info("deferred task done", metadata: ["task": "\(identifier)", "attempt": "\(start.attempt)"])
            broadcast.publish(.succeeded(identifier, attempt: start.attempt))
        case .interrupted(let why):
            logger.notice(
                "deferred task interrupted: it runs again later", metadata: ["task": "\(identifier)", "why": "\(why)"])
            broadcast.publish(.interrupted(identifier))
        case .failed(let error):
            if let retryAt {
                logger.warning(
                    "deferred task failed: it is tried again",
                    metadata: [
                        "task": "\(identifier)", "attempt": "\(start.attempt)", "error": "\(error)",
                        "retryIn": "\((retryAt - now).compact)",
                    ])
            } else {
                logger.error(
                    "deferred task failed \(start.attempt) times: given up until it is submitted again",
                    metadata: ["task": "\(identifier)", "error": "\(error)"])
            }
            broadcast.publish(.failed(error, attempt: start.attempt, retryAt: retryAt))
        }
        alarm.ring()
    }

    /// How long a run the closed ledger refused waits before it asks again.
    static let closedLedgerPause = Duration.seconds(5)

    /// `retryDelay` doubled per failure in a row, at most `maxRetryDelay`.
    func backoff(afterFailures failures: Int) -> Duration {
        var delay = configuration.retryDelay
        for _ in 1..<max(failures, 1) {
            delay = delay * 2
            if delay >= configuration.maxRetryDelay { return configuration.maxRetryDelay }
        }
        return min(delay, configuration.maxRetryDelay)
    }

    // MARK: The store

    private func load() {
        guard let store else { return }
        let stored: [StoredDeferredTask]
        do {
            stored = try store.load()
        } catch {
            logger.error("deferred tasks: cannot read the pending requests, starting with none: \(error)")
            return
        }
        let now = self.now
        let wallNow = wallClock()
        state.withLock { state in
            for task in stored {
                var request = task.request
                // The wall clock's distance, onto this run's clock; a time already past is now.
                request.earliestBegin = task.earliestBeginWall.map { wall in
                    wall > wallNow ? now + (wall - wallNow) : now
                }
                state.pending[request.identifier] = Pending(
                    request: request, failures: min(task.failures, configuration.maxAttempts - 1),
                    order: state.nextOrder)
                state.nextOrder += 1
            }
        }
        if !stored.isEmpty {
            logger.info("deferred tasks: \(stored.count) pending from the last run")
        }
    }

    private func save() {
        guard let store else { return }
        // One save at a time, each of the state as it is then: two runs ending together wrote one temporary file
        // at once, and the second's rename found it gone.
        saving.withLock { _ in saveNow(to: store) }
    }

    private func saveNow(to store: any DeferredTaskStore) {
        let now = self.now
        let wallNow = wallClock()
        let tasks = state.withLock { state in
            // Runs under way are kept too: a crash during one runs it again at the next start (its handler must
            // take up where the last one stopped, as a history download does from its position).
            let kept =
                state.pending.values.map { ($0.order, $0.request, $0.failures) }
                + state.running.values.filter { state.pending[$0.request.identifier] == nil }.map {
                    ($0.order, $0.request, $0.attempt - 1)
                }
            return kept.sorted { $0.0 < $1.0 }.map { _, request, failures in
                StoredDeferredTask(
                    request: request, earliestBeginWall: request.earliestBegin.map { wallNow + ($0 - now) },
                    failures: failures)
            }
        }
        do {
            try store.save(tasks)
        } catch {
            logger.error("deferred tasks: cannot save the pending requests: \(error)")
        }
    }
}
