import Basics

/// The ledger's state, only ever touched under its lock. Pure bookkeeping: no logging, no callbacks; the
/// results say what the caller must do once the lock is released.
struct LedgerState {
    enum TimerKind: Int, Comparable {
        case warning = 0, deadline = 1, forcedEnd = 2

        static func < (lhs: TimerKind, rhs: TimerKind) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// One pending timer. Each open window has exactly one live timer (its next phase); timers of windows that
    /// ended stay in the heap until they surface or the heap is compacted.
    struct Timer: Comparable {
        var at: KeepAliveInstant
        var kind: TimerKind
        var id: BackgroundTaskID

        static func < (lhs: Timer, rhs: Timer) -> Bool {
            (lhs.at, lhs.kind, lhs.id) < (rhs.at, rhs.kind, rhs.id)
        }
    }

    struct OpenWindow {
        var entry: BackgroundTaskEntry
        var nextTimer: Timer
        var expirationHandler: (@Sendable () -> Void)?
        var hooks: BackgroundTaskLedger.Hooks
        var expiredEarly = false
    }

    enum BeginResult {
        case began(BackgroundTaskEntry, startDriver: Bool, ringDriver: Bool)
        case refused(BackgroundTaskRecord)
    }

    enum EndResult {
        /// `wakeDriver`: the last window closed; the driver should stop sleeping on timers that no longer matter.
        case ended(BackgroundTaskRecord, idleWaiters: [CheckedContinuation<Void, Never>], wakeDriver: Bool)
        case alreadyEnded
        case unknown
    }

    /// What one pass of the driver found due.
    enum DueAction {
        case warn(BackgroundTaskEntry, timeRemaining: Duration)
        case expire(BackgroundTaskEntry, handler: (@Sendable () -> Void)?, cancel: (@Sendable () -> Void)?)
        case forceEnd(BackgroundTaskRecord, hook: (@Sendable (BackgroundTaskRecord) -> Void)?)
    }

    var isOpen = true
    var nextID: UInt64 = 1
    var open: [BackgroundTaskID: OpenWindow] = [:]
    var timers = Heap<Timer>()
    var history: RingBuffer<BackgroundTaskRecord>
    var driverRunning = false
    /// What the driver sleeps until; a new timer earlier than this rings it.
    var driverWakesAt: KeepAliveInstant?
    var idleWaiters: [CheckedContinuation<Void, Never>] = []

    init(historyCapacity: Int) {
        history = RingBuffer(capacity: historyCapacity)
    }

    mutating func begin(
        name: String,
        budget: Duration,
        now: KeepAliveInstant,
        warningLead: Duration,
        expirationHandler: (@Sendable () -> Void)?,
        hooks: BackgroundTaskLedger.Hooks
    ) -> BeginResult {
        let id = BackgroundTaskID(rawValue: nextID)
        nextID += 1
        guard isOpen else {
            let record = BackgroundTaskRecord(
                id: id, name: name, began: now, ended: now, budget: budget, outcome: .refused)
            history.append(record)
            return .refused(record)
        }
        let deadline = now + budget
        let timer =
            warningLead > .zero && warningLead < budget
            ? Timer(at: deadline + (.zero - warningLead), kind: .warning, id: id)
            : Timer(at: deadline, kind: .deadline, id: id)
        let entry = BackgroundTaskEntry(
            id: id, name: name, began: now, budget: budget, deadline: deadline, phase: .running)
        open[id] = OpenWindow(entry: entry, nextTimer: timer, expirationHandler: expirationHandler, hooks: hooks)
        let ring = schedule(timer)
        if driverRunning {
            return .began(entry, startDriver: false, ringDriver: ring)
        }
        driverRunning = true
        return .began(entry, startDriver: true, ringDriver: false)
    }

    /// Adds a timer; true when the driver must wake to take it into account.
    private mutating func schedule(_ timer: Timer) -> Bool {
        timers.insert(timer)
        compactIfNeeded()
        if let wakesAt = driverWakesAt, timer.at < wakesAt { return true }
        return false
    }

    /// Drops timers of windows that already ended once they outnumber the live ones (a million begin/end pairs
    /// with long budgets must not grow the heap without bound).
    private mutating func compactIfNeeded() {
        guard timers.count > 64, timers.count > 4 * open.count else { return }
        timers = Heap(open.values.map(\.nextTimer))
    }

    mutating func end(_ id: BackgroundTaskID, now: KeepAliveInstant, forced: Bool) -> EndResult {
        guard let window = open.removeValue(forKey: id) else {
            return id.rawValue < nextID ? .alreadyEnded : .unknown
        }
        let outcome: BackgroundTaskOutcome
        if forced {
            outcome = .forcedEnd
        } else if window.entry.phase == .expired {
            outcome = window.expiredEarly ? .cancelled : .expired
        } else {
            outcome = .completed
        }
        let record = BackgroundTaskRecord(
            id: id,
            name: window.entry.name,
            began: window.entry.began,
            ended: now,
            budget: window.entry.budget,
            outcome: outcome
        )
        history.append(record)
        var waiters: [CheckedContinuation<Void, Never>] = []
        if open.isEmpty {
            swap(&waiters, &idleWaiters)
        }
        return .ended(record, idleWaiters: waiters, wakeDriver: open.isEmpty && driverRunning && !forced)
    }

    /// Drops timers of ended windows from the top of the heap, so the driver never wakes for them.
    mutating func nextLiveTimer() -> KeepAliveInstant? {
        while let timer = timers.min, open[timer.id]?.nextTimer != timer {
            timers.popMin()
        }
        return timers.min?.at
    }

    /// Pops every timer due at `now` and advances its window to the next phase.
    mutating func takeDue(now: KeepAliveInstant, gracePeriod: Duration) -> [DueAction] {
        var actions: [DueAction] = []
        while let timer = timers.min, timer.at <= now {
            timers.popMin()
            guard var window = open[timer.id], window.nextTimer == timer else { continue }  // stale
            switch timer.kind {
            case .warning:
                window.entry.phase = .warned
                window.nextTimer = Timer(at: window.entry.deadline, kind: .deadline, id: timer.id)
                timers.insert(window.nextTimer)
                open[timer.id] = window
                actions.append(.warn(window.entry, timeRemaining: now.duration(to: window.entry.deadline)))
            case .deadline:
                window.entry.phase = .expired
                window.nextTimer = Timer(at: window.entry.deadline + gracePeriod, kind: .forcedEnd, id: timer.id)
                timers.insert(window.nextTimer)
                let handler = window.expirationHandler
                window.expirationHandler = nil  // runs once
                open[timer.id] = window
                actions.append(.expire(window.entry, handler: handler, cancel: window.hooks.cancel))
            case .forcedEnd:
                let hook = window.hooks.forcedEnd
                // Recorded at the instant it was due, not when a late wake (a suspend) noticed it: a forced end
                // always reads as budget + grace used.
                if case .ended(let record, let waiters, _) = end(timer.id, now: timer.at, forced: true) {
                    actions.append(.forceEnd(record, hook: hook))
                    idleWaiters.append(contentsOf: waiters)  // resumed by the driver after the pass
                }
            }
        }
        return actions
    }

    /// Expires every open window now (shutdown, sleep); each gets the grace from now to end itself.
    mutating func expireAll(now: KeepAliveInstant, gracePeriod: Duration) -> [DueAction] {
        var actions: [DueAction] = []
        for id in open.keys.sorted() {
            guard var window = open[id], window.entry.phase != .expired else { continue }
            window.entry.phase = .expired
            window.expiredEarly = true
            window.nextTimer = Timer(at: now + gracePeriod, kind: .forcedEnd, id: id)
            timers.insert(window.nextTimer)
            let handler = window.expirationHandler
            window.expirationHandler = nil
            open[id] = window
            actions.append(.expire(window.entry, handler: handler, cancel: window.hooks.cancel))
        }
        return actions
    }
}

/// A fixed-capacity FIFO that drops its oldest element when full.
struct RingBuffer<Element> {
    private var storage: [Element] = []
    private var head = 0
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        storage.reserveCapacity(Swift.min(capacity, 1_024))
    }

    mutating func append(_ element: Element) {
        if storage.count < capacity {
            storage.append(element)
        } else {
            storage[head] = element
            head = (head + 1) % capacity
        }
    }

    var elements: [Element] {
        Array(storage[head...] + storage[..<head])
    }

    var count: Int { storage.count }
}
