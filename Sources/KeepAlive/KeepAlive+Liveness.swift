extension KeepAlive {
    /// What the scheduler owes right now, read under its locks without waiting for it: the basis of a watchdog
    /// that means "polls work" (the daemon's `WATCHDOG=1`). Reading it needs no task of the scheduler's, so a
    /// thread of its own can tell a wedged scheduler from an idle one.
    public struct Liveness: Sendable, Hashable {
        /// Now, on the scheduler's clock.
        public var now: KeepAliveInstant
        /// Whether `run()` is running.
        public var isRunning: Bool
        /// The earliest thing the scheduler should already have done or will do next: a registration's next
        /// tick, or an open window's next timer (its warning, its deadline, its forced end). `nil` when nothing
        /// is owed (paused, every registration finished, nothing registered).
        public var earliestOwed: KeepAliveInstant?
        /// Ticks fired so far (`statistics.ticksFired`).
        public var ticksFired: UInt64
        /// Windows currently open in the ledger.
        public var openWindows: Int

        public init(
            now: KeepAliveInstant, isRunning: Bool, earliestOwed: KeepAliveInstant?, ticksFired: UInt64,
            openWindows: Int
        ) {
            self.now = now
            self.isRunning = isRunning
            self.earliestOwed = earliestOwed
            self.ticksFired = ticksFired
            self.openWindows = openWindows
        }

        /// How late the scheduler is: how long ago the earliest owed thing was due (zero when it is not due yet).
        public var lateness: Duration {
            guard isRunning, let earliestOwed, earliestOwed < now else { return .zero }
            return earliestOwed.duration(to: now)
        }
    }

    /// The scheduler's liveness now (see ``Liveness``).
    public var liveness: Liveness {
        let now = time.now
        let (running, nextFire, fired) = state.withLock { state in
            (
                state.isRunning,
                state.registrations.values.lazy.filter { !$0.isFinished }.compactMap { $0.schedule?.nextFire }.min(),
                state.statistics.ticksFired
            )
        }
        let (nextTimer, open) = ledger.state.withLock { state in
            (state.open.values.lazy.map(\.nextTimer.at).min(), state.open.count)
        }
        let owed = [nextFire, nextTimer].compactMap { $0 }.min()
        return Liveness(now: now, isRunning: running, earliestOwed: owed, ticksFired: fired, openWindows: open)
    }
}
