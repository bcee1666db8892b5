import Basics

extension BackgroundTaskLedger {
    /// Runs while windows are open: sleeps until the next timer, then warns, expires or force-ends.
    func drive() async {
        while true {
            let now = time.now
            let (actions, idleWaiters, wakeAt):
                ([LedgerState.DueAction], [CheckedContinuation<Void, Never>], KeepAliveInstant?) =
                    state.withLock { state in
                        let actions = state.takeDue(now: now, gracePeriod: configuration.gracePeriod)
                        var waiters: [CheckedContinuation<Void, Never>] = []
                        if state.open.isEmpty {
                            swap(&waiters, &state.idleWaiters)
                        }
                        guard !state.open.isEmpty else {
                            state.timers = Heap()
                            state.driverRunning = false
                            state.driverWakesAt = nil
                            return (actions, waiters, nil)
                        }
                        state.driverWakesAt = state.nextLiveTimer()
                        return (actions, waiters, state.driverWakesAt)
                    }
            perform(actions)
            for waiter in idleWaiters { waiter.resume() }
            guard let wakeAt else { return }
            await alarm.wait(until: wakeAt)
        }
    }

    /// Processes what is due now, synchronously: the driver's own step, for tests that step the clock and
    /// need the ledger's state settled before they look at it.
    package func processDueTimers() {
        let now = time.now
        let (actions, waiters) = state.withLock { state in
            let actions = state.takeDue(now: now, gracePeriod: configuration.gracePeriod)
            var waiters: [CheckedContinuation<Void, Never>] = []
            if state.open.isEmpty { swap(&waiters, &state.idleWaiters) }
            return (actions, waiters)
        }
        perform(actions)
        for waiter in waiters { waiter.resume() }
    }

    func perform(_ actions: [LedgerState.DueAction]) {
        let now = time.now
        for action in actions {
            switch action {
            case .warn(let entry, let remaining):
                logger.notice(
                    "background task running out of time",
                    metadata: ["task": "\(entry.name)", "id": "\(entry.id)", "remaining": "\(remaining.compact)"]
                )
                broadcast.publish(.warning(id: entry.id, name: entry.name, timeRemaining: remaining, at: now))
            case .expire(let entry, let handler, let cancel):
                let early = now < entry.deadline
                logger.warning(
                    early ? "background task expired early (ledger closing)" : "background task expired",
                    metadata: ["task": "\(entry.name)", "id": "\(entry.id)", "budget": "\(entry.budget.compact)"]
                )
                broadcast.publish(.expired(id: entry.id, name: entry.name, at: now, early: early))
                handler?()
                cancel?()
            case .forceEnd(let record, let hook):
                logger.error(
                    "background task force-ended: not ended within the grace period after expiring",
                    metadata: [
                        "task": "\(record.name)", "id": "\(record.id)",
                        "grace": "\(configuration.gracePeriod.compact)",
                    ]
                )
                broadcast.publish(.ended(record))
                hook?(record)
            }
        }
    }

    // MARK: Closing (shutdown, sleep)

    /// Whether `begin` hands out windows.
    public var isOpen: Bool {
        state.withLock { $0.isOpen }
    }

    /// Refuses new windows: `begin` returns ``BackgroundTaskID/invalid`` until ``reopen()``.
    public func close() {
        state.withLock { $0.isOpen = false }
        logger.debug("background task ledger closed")
    }

    public func reopen() {
        state.withLock { $0.isOpen = true }
        logger.debug("background task ledger reopened")
    }

    /// Expires every open window now: expiration handlers run and window tasks are cancelled; each window is
    /// force-ended if not ended within the grace period from now.
    public func expireAll() {
        let now = time.now
        let actions = state.withLock { $0.expireAll(now: now, gracePeriod: configuration.gracePeriod) }
        guard !actions.isEmpty else { return }
        perform(actions)
        alarm.ring()  // the forced ends may come before what the driver sleeps until
    }

    /// Returns once no window is open. Bounded by the grace period after ``expireAll()``.
    public func waitUntilIdle() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let idle = state.withLock { state in
                if state.open.isEmpty { return true }
                state.idleWaiters.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
    }
}
