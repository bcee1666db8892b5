/// One registration's place on its time grid: deadlines are `anchor + k·interval` (plus jitter), so thousands
/// of ticks never drift; a late wake fires once and skips to the first grid point after now.
struct RegistrationSchedule {
    /// The grid's origin: the start, or the last tick when the interval changed.
    private(set) var anchor: KeepAliveInstant
    /// Grid index of `nextGrid`.
    private(set) var index: Int64 = 0
    /// Effective interval, `nil` while paused.
    private(set) var interval: Duration?
    /// The next grid point (no jitter), `nil` while paused.
    private(set) var nextGrid: KeepAliveInstant?
    /// When the next tick fires: `nextGrid` plus this deadline's jitter, or now when a change made it overdue.
    private(set) var nextFire: KeepAliveInstant?
    /// The grid point the last tick stood for (for a catch-up tick: the latest grid point at or before it).
    private(set) var lastTick: KeepAliveInstant?

    init(startingAt now: KeepAliveInstant, interval: Duration?) {
        anchor = now
        self.interval = interval
        if interval != nil {
            nextGrid = now
            nextFire = now  // the first tick fires at start (the seed's `bgTimer?.fire()`)
        }
    }

    /// Moves past a tick fired at `now` for `nextGrid`; returns how many grid points were missed in between
    /// (a clock jump or a suspend), which are counted, never fired.
    mutating func advance(firedAt now: KeepAliveInstant, jitter: () -> Duration) -> Int64 {
        guard let interval, let grid = nextGrid else { return 0 }
        let late = max(.zero, grid.duration(to: now))
        let skipped = Int64(late.attoseconds / interval.attoseconds)  // whole intervals late
        lastTick = grid + interval * skipped
        index += skipped + 1
        let next = anchor + interval * index
        nextGrid = next
        nextFire = next + jitter()
        return skipped
    }

    /// Fires now and lays the grid from here (after a sleep); returns how many grid points before now were
    /// never fired (they are counted, not fired).
    mutating func restart(at now: KeepAliveInstant) -> Int64 {
        guard let interval else { return 0 }
        var missed: Int64 = 0
        if let grid = nextGrid, grid <= now {
            // The pending grid point is the catch-up tick itself; count the ones after it that also passed.
            missed = Int64(grid.duration(to: now).attoseconds / interval.attoseconds)
        }
        anchor = now
        index = 0
        nextGrid = now
        nextFire = now
        return missed
    }

    /// Applies a new effective interval at once: the next deadline is recomputed from the last tick and fires
    /// now if it is already past. `nil` pauses.
    mutating func change(interval newInterval: Duration?, now: KeepAliveInstant, jitter: () -> Duration) {
        interval = newInterval
        guard let newInterval else {
            nextGrid = nil
            nextFire = nil
            return
        }
        if let lastTick, lastTick + newInterval > now {
            anchor = lastTick
            index = 1
            nextGrid = lastTick + newInterval
            nextFire = lastTick + newInterval + jitter()
            return
        }
        // Overdue (or never fired, paused since start): fire now and lay the new grid from here, so the
        // time spent paused or at the old interval is not counted as missed ticks.
        anchor = now
        index = 0
        nextGrid = now
        nextFire = now
    }
}
