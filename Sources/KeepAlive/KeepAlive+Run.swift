import ServiceLifecycle
import Basics

extension KeepAlive {
    /// Runs the scheduler until the task is cancelled, a graceful shutdown is signalled (in a `ServiceGroup`),
    /// or ``stop()`` is called. On the way out the ledger closes, open windows expire, and it waits for them at
    /// most the ledger's grace period.
    public func run() async throws {
        let now = time.now
        let started: Bool = state.withLock { state in
            guard !state.isRunning else { return false }
            state.isRunning = true
            state.stopRequested = false
            state.power = powerSource.state
            state.epoch = now
            // By index, in place: iterating `keys` while writing would copy the whole dictionary (4.7 MB at
            // 10,000 registrations).
            var index = state.registrations.startIndex
            while index != state.registrations.endIndex {
                let base = state.registrations.values[index].baseInterval
                var schedule = RegistrationSchedule(
                    startingAt: now,
                    interval: configuration.lowPower.effectiveInterval(base, in: state.power)
                )
                if let phase = state.registrations.values[index].phase {
                    schedule.align(to: now + phase, now: now) { .zero }
                }
                state.registrations.values[index].schedule = schedule
                state.registrations.formIndex(after: &index)
            }
            return true
        }
        guard started else {
            throw KeepAliveError(code: .alreadyRunning, message: "this KeepAlive is already running")
        }
        ledger.reopen()
        let power = powerState
        logger.info(
            "keep-alive scheduler started",
            metadata: [
                "interval": "\(configuration.interval.compact)", "power": "\(power.rawValue)",
            ]
        )
        broadcast.publish(.started(at: now, power: power))

        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                group.addTask { await self.observePower() }
                await self.loop()
                group.cancelAll()
            }
        } onGracefulShutdown: {
            self.requestStop()
        }
        await drainWindows()

        let waiters = state.withLock { state in
            state.isRunning = false
            state.stopRequested = false
            state.epoch = nil
            var index = state.registrations.startIndex
            while index != state.registrations.endIndex {
                state.registrations.values[index].schedule = nil
                state.registrations.formIndex(after: &index)
            }
            defer { state.stopWaiters = [] }
            return state.stopWaiters
        }
        logger.info("keep-alive scheduler stopped")
        broadcast.publish(.stopped(at: time.now))
        for waiter in waiters { waiter.resume() }
    }

    /// Starts ``run()`` in a task of its own, for app code that has no service group.
    public func start() {
        state.withLock { state in
            guard state.startedTask == nil, !state.isRunning else { return }
            state.startedTask = Task { try? await self.run() }
        }
    }

    /// Stops the scheduler: no new ticks, open windows expire at once, and it returns once they ended (at most
    /// the grace period later, when a callback ignores cancellation).
    public func stop() async {
        let running: Bool = state.withLock { state in
            state.startedTask = nil
            return state.isRunning
        }
        guard running else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let stopped = state.withLock { state in
                guard state.isRunning else { return true }
                state.stopWaiters.append(continuation)
                return false
            }
            if stopped { continuation.resume() }
            requestStop()
        }
    }

    func requestStop() {
        state.withLock { $0.stopRequested = true }
        alarm.ring()
    }

    // MARK: Sleep

    /// The host is about to sleep (logind's `PrepareForSleep(true)`): the ledger closes, so ticks until
    /// ``resumeAfterSleep()`` are reported as refused; open windows expire early, and this returns when every
    /// one has ended and been reported (bounded by the ledger's grace). The caller then drops its links and
    /// releases its sleep inhibitor.
    public func prepareForSleep() async {
        logger.info("preparing for sleep: closing the ledger and ending open windows")
        await drainWindows()
    }

    /// The host woke up (`PrepareForSleep(false)`): the ledger reopens and every registration fires now, once,
    /// and continues on a grid laid from now. Grid points slept through are counted as missed ticks.
    public func resumeAfterSleep() {
        let now = time.now
        ledger.reopen()
        let missed: UInt64 = state.withLock { state in
            var missed: UInt64 = 0
            var index = state.registrations.startIndex
            while index != state.registrations.endIndex {
                defer { state.registrations.formIndex(after: &index) }
                guard var schedule = state.registrations.values[index].schedule,
                    !state.registrations.values[index].isFinished
                else { continue }
                missed += UInt64(schedule.restart(at: now))
                state.registrations.values[index].schedule = schedule
            }
            state.statistics.missedTicks += missed
            return missed
        }
        logger.info("resumed after sleep: polling now", metadata: ["missedTicks": "\(missed)"])
        alarm.ring()
    }

    private func drainWindows() async {
        ledger.close()
        ledger.expireAll()
        await ledger.waitUntilIdle()
        // A window ends a moment before its report is delivered (same task, right after `ledger.end`).
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let reported = state.withLock { state in
                if state.unreportedLaunches == 0 { return true }
                state.reportWaiters.append(continuation)
                return false
            }
            if reported { continuation.resume() }
        }
    }

    // MARK: The loop

    /// The loop runs where the launches' tasks prefer to run (``LaunchGate/preferredExecutor``, the D-Bus
    /// connection's thread) when their gate lets reports be written there: a tick then wakes that one thread, which
    /// decides, begins the windows and starts the polls without waking another. Otherwise, and with no gate, on
    /// the default executor. It moves when that executor changes (a new D-Bus connection).
    private func loop() async {
        while true {
            let executor = loopExecutor()
            let stopped = await withTaskExecutorPreference(executor) { await self.loop(on: executor) }
            if stopped { return }
        }
    }

    private func loopExecutor() -> (any TaskExecutor)? {
        // The gate is asked outside the lock: its executor may sit behind locks of its own (a reconnecting
        // transport's).
        let gate = state.withLock { state in state.registrations.values.lazy.compactMap(\.gate).first }
        guard let gate, gate.reportsOnPreferredExecutor else { return nil }
        return gate.preferredExecutor
    }

    /// The loop while `executor` stays the one to run on: true when the scheduler stops.
    private func loop(on executor: (any TaskExecutor)?) async -> Bool {
        while true {
            let now = time.now
            let (stop, launches, skipped, wakeAt) = state.withLock { state in
                guard !state.stopRequested, !Task.isCancelled else {
                    return (true, [Launch](), [(Launch, TickReport.SkipReason)](), KeepAliveInstant?.none)
                }
                let (launches, skipped) = takeDue(&state, now: now)
                let wakeAt = state.registrations.values.lazy.filter { !$0.isFinished }.compactMap {
                    $0.schedule?.nextFire
                }.min()
                return (false, launches, skipped, wakeAt)
            }
            if stop { return true }
            for (launch, reason) in skipped {
                deliver(launch.report(.skipped(reason)), to: launch.onReport)
            }
            for launch in launches {
                self.launch(launch)
            }
            await alarm.wait(until: wakeAt)
            if loopExecutor() !== executor { return false }
        }
    }

    /// Decides, under the lock, what fires at `now`: advances each due registration's grid, counts missed grid
    /// points, and sorts the due ones into launches and skips.
    private func takeDue(
        _ state: inout SchedulerState,
        now: KeepAliveInstant
    ) -> ([Launch], [(Launch, TickReport.SkipReason)]) {
        var launches: [Launch] = []
        var skipped: [(Launch, TickReport.SkipReason)] = []
        let due = state.registrations.values
            .filter { registration in
                !registration.isFinished && (registration.schedule?.nextFire.map { $0 <= now } ?? false)
            }
            .map(\.token)
            .sorted()
        for token in due {
            var registration = state.registrations[token]!
            var schedule = registration.schedule!
            guard let scheduled = schedule.nextGrid, let interval = schedule.interval else { continue }
            let jitterLimit = configuration.jitter
            let missed = schedule.advance(firedAt: now) { state.jitter(upTo: jitterLimit) }
            registration.schedule = schedule
            let tick = registration.nextTick
            registration.nextTick += 1
            state.statistics.ticksFired += 1
            if missed > 0 {
                state.statistics.missedTicks += UInt64(missed)
                logger.notice(
                    "missed keep-alive ticks (suspend or clock jump): firing one catch-up tick",
                    metadata: ["name": "\(registration.name)", "missed": "\(missed)"]
                )
                broadcast.publish(.missed(name: registration.name, count: missed, at: now))
            }
            let launch = Launch(
                token: token,
                name: registration.name,
                tick: tick,
                scheduled: scheduled,
                fired: now,
                interval: interval,
                power: state.power,
                budget: registration.budget,
                work: registration.work,
                onReport: registration.onReport,
                gate: registration.gate
            )
            broadcast.publish(.fired(name: registration.name, tick: tick, scheduled: scheduled, at: now))
            if registration.inFlight {
                state.statistics.skippedOverlap += 1
                skipped.append((launch, .overlap))
            } else if let until = registration.backoffUntil, scheduled < until {
                state.statistics.skippedBackoff += 1
                skipped.append((launch, .backoff))
            } else {
                registration.inFlight = true
                state.statistics.callbacksRun += 1
                launches.append(launch)
            }
            state.registrations[token] = registration
        }
        return (launches, skipped)
    }

    // MARK: One window

    private func launch(_ launch: Launch) {
        let taskBox = Locked(LaunchBox())
        // A gate whose callbacks run on an executor of their own (the D-Bus connection's thread) has the task
        // start there: a poll let in by a slot released on that thread then starts without waking another. The
        // report is written from the default executor, as without a gate, so that record output never blocks that
        // thread; unless the gate says its reports never block, and then it is written where the callback ended,
        // and the ledger's driver (which reports forced ends) runs there too.
        let executor = launch.gate?.preferredExecutor
        let reportInPlace = executor == nil || launch.gate?.reportsOnPreferredExecutor == true
        let id = ledger.begin(
            name: launch.name,
            budget: launch.budget,
            expirationHandler: nil,
            hooks: BackgroundTaskLedger.Hooks(
                cancel: {
                    let (task, request) = taskBox.withLock { box in
                        box.cancelled = true
                        return (box.task, box.request)
                    }
                    if let task {
                        task.cancel()
                    } else if let request {
                        self.withdraw(request, launch, taskBox)
                    }
                    // Neither yet: the launch is still asking its gate, and sees `cancelled` when it is done.
                },
                forcedEnd: { record in
                    let error = KeepAliveError(
                        code: .forcedEnd,
                        message:
                            """
                                callback did not return within the grace after its window (budget \
                                \(launch.budget.compact)) expired or was cancelled
                                """
                    )
                    let detail = taskBox.withLock { $0.request?.fallbackDetail }
                    self.complete(launch, LaunchResult(.failed(error), detail: detail), window: record, finished: false)
                },
                driverExecutor: reportInPlace ? executor : nil
            )
        )
        guard id != .invalid, let entry = ledger.state.withLock({ $0.open[id]?.entry }) else {
            state.withLock { state in
                state.registrations[launch.token]?.inFlight = false
                state.statistics.refused += 1
            }
            deliver(launch.report(.skipped(.refused)), to: launch.onReport)
            return
        }
        state.withLock { $0.unreportedLaunches += 1 }
        taskBox.withLock { $0.id = id }
        let window = PollWindow(entry: entry, tick: launch.tick, ledger: ledger)
        let start: @Sendable (@escaping LaunchWork) -> Void = { work in
            let task = Task(executorPreference: executor) {
                let result = await work(window)
                let record = self.ledger.end(id)
                guard let record else {
                    // Force-ended earlier and already reported: only the overlap guard is left to clear.
                    self.state.withLock { $0.registrations[launch.token]?.inFlight = false }
                    return
                }
                if reportInPlace {
                    self.complete(launch, result, window: record, finished: true)
                } else {
                    Task { self.complete(launch, result, window: record, finished: true) }
                }
            }
            taskBox.withLock { box in
                box.task = task
                if box.cancelled { task.cancel() }
            }
        }
        guard let gate = launch.gate else {
            // Registered with a handler, never without: `add` is given one or the other.
            guard let work = launch.work else { return decline(launch, id: id) }
            return start(work)
        }
        let request = gate.request(window, start: start)
        if request.isDeclined { return decline(launch, id: id) }
        let cancelledWhileAsking = taskBox.withLock { box in
            box.request = request
            return box.cancelled && box.task == nil
        }
        if cancelledWhileAsking { withdraw(request, launch, taskBox) }
    }

    /// The gate declined the tick: its window ends unused, and the tick is reported as declined (backoff as it
    /// was, counted neither as a run nor as a failure).
    private func decline(_ launch: Launch, id: BackgroundTaskID) {
        _ = ledger.end(id)
        state.withLock { state in
            state.registrations[launch.token]?.inFlight = false
            state.statistics.callbacksRun -= 1
            state.statistics.declined += 1
        }
        deliver(launch.report(.declined), to: launch.onReport)
        finishReport()
    }

    /// The window of a launch still waiting for its gate ended: takes the request back and, if its callback had
    /// not started, ends the window and reports it with the gate's result.
    private func withdraw(_ request: LaunchRequest, _ launch: Launch, _ taskBox: Locked<LaunchBox>) {
        guard let result = request.withdraw() else { return }  // started meanwhile: its task was told
        guard let id = taskBox.withLock({ $0.id }) else { return }
        if let record = ledger.end(id) {
            complete(launch, result, window: record, finished: true)
        } else {
            state.withLock { $0.registrations[launch.token]?.inFlight = false }
        }
    }

    /// Records a tick's result: backoff bookkeeping, statistics, the report.
    private func complete(_ launch: Launch, _ launched: LaunchResult, window: BackgroundTaskRecord, finished: Bool) {
        let result = launched.result
        let interval = launch.interval
        let maxMultiplier = configuration.maxFailureBackoffMultiplier
        state.withLock { state in
            if launched.isContention {
                state.statistics.contended += 1
            } else if result.isFailure {
                state.statistics.failures += 1
            }
            if window.outcome == .forcedEnd { state.statistics.forcedEnds += 1 }
            guard var registration = state.registrations[launch.token] else { return }
            if finished { registration.inFlight = false }
            if launched.isContention || launched.keepsBackoff {
                // Neither the registration's failure nor its success: the backoff stays as it was.
            } else if result.isFailure {
                registration.consecutiveFailures += 1
                let exponent = min(registration.consecutiveFailures - 1, 62)
                let multiplier = min(Int64(1) << exponent, Int64(maxMultiplier))
                registration.backoffUntil = launch.scheduled + interval * multiplier
            } else {
                registration.consecutiveFailures = 0
                registration.backoffUntil = nil
            }
            state.registrations[launch.token] = registration
        }
        deliver(launch.report(.ran(result: result, window: window), detail: launched.detail), to: launch.onReport)
        finishReport()
    }

    /// One begun window's report is out: `run()` may return once none is left.
    private func finishReport() {
        let waiters = state.withLock { state in
            state.unreportedLaunches -= 1
            guard state.unreportedLaunches == 0 else { return [CheckedContinuation<Void, Never>]() }
            defer { state.reportWaiters = [] }
            return state.reportWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    private func deliver(_ report: TickReport, to onReport: (@Sendable (TickReport) -> Void)?) {
        onReport?(report)
        broadcast.publish(.report(report))
    }

    // MARK: Power

    private func observePower() async {
        // Subscribe before reading the current state, so a change between the two is never lost.
        let updates = powerSource.updates()
        apply(power: powerSource.state)
        for await power in updates {
            apply(power: power)
        }
    }

    /// Applies a power state at once: every registration's next deadline is recomputed from its last tick.
    func apply(power: PowerState) {
        let now = time.now
        let previous: PowerState? = state.withLock { state in
            guard state.power != power else { return nil }
            let previous = state.power
            state.power = power
            let jitterLimit = configuration.jitter
            var index = state.registrations.startIndex
            while index != state.registrations.endIndex {
                defer { state.registrations.formIndex(after: &index) }
                guard var schedule = state.registrations.values[index].schedule else { continue }
                let base = state.registrations.values[index].baseInterval
                schedule.change(
                    interval: configuration.lowPower.effectiveInterval(base, in: power),
                    now: now
                ) { state.jitter(upTo: jitterLimit) }
                state.registrations.values[index].schedule = schedule
            }
            return previous
        }
        guard let previous else { return }
        let interval = configuration.lowPower.effectiveInterval(configuration.interval, in: power)
        logger.info(
            "power state changed",
            metadata: [
                "from": "\(previous.rawValue)", "to": "\(power.rawValue)",
                "interval": "\(interval.map(\.compact) ?? "paused")",
            ]
        )
        broadcast.publish(.powerChanged(from: previous, to: power, at: now))
        alarm.ring()
    }
}

/// What a launch's window hooks reach: its window, its task once made, its gate request while it waits.
struct LaunchBox {
    var id: BackgroundTaskID?
    var task: Task<Void, Never>?
    var request: LaunchRequest?
    var cancelled = false
}
