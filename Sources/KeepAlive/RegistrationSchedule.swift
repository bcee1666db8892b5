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
    /// Set by placement (``align(to:now:jitter:)``): the grid's points fall on `origin + k·interval`, whatever the
    /// interval, also after a change of interval or a sleep. `nil`: the grid is laid from its anchor alone.
    private(set) var origin: KeepAliveInstant?

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
        continueAligned(afterFiringAt: now)
        return missed
    }

    /// Puts the grid's points on `origin + k·interval` (placement: devices sharing an adapter get phases that keep
    /// their links apart). The next point is the first at least a whole interval after the last tick (and not
    /// before now): a device is never polled sooner than its interval says, and later by less than one interval,
    /// once. A first tick still to fire (at start) fires as it would; the grid continues aligned after it.
    /// Paused: applied when an interval is set again.
    mutating func align(to origin: KeepAliveInstant, now: KeepAliveInstant, jitter: () -> Duration) {
        self.origin = origin
        guard let interval, let grid = nextGrid else { return }
        guard let lastTick else {
            continueAligned(afterFiringAt: grid)
            return
        }
        let next = Self.point(on: origin, interval, notBefore: max(lastTick + interval, now))
        anchor = next
        index = 0
        nextGrid = next
        nextFire = next + jitter()
    }

    /// For a grid whose next tick fires at `fire`, off the aligned points (now, at start, after a sleep or an
    /// overdue change): the ticks after it fall on the aligned points again.
    private mutating func continueAligned(afterFiringAt fire: KeepAliveInstant) {
        guard let origin, let interval else { return }
        let next = Self.point(on: origin, interval, notBefore: fire + interval)
        // `advance` moves to `anchor + interval·(index + 1)` after the tick at `nextGrid`.
        anchor = next.advanced(by: Duration.zero - interval)
        index = 0
    }

    /// The first point of `origin + k·interval` at or after `earliest`.
    static func point(on origin: KeepAliveInstant, _ interval: Duration, notBefore earliest: KeepAliveInstant)
        -> KeepAliveInstant
    {
        let step = interval.attoseconds
        var (quotient, remainder) = origin.duration(to: earliest).attoseconds.quotientAndRemainder(dividingBy: step)
        if remainder > 0 { quotient += 1 }
        return origin + Duration(attoseconds: quotient * step)
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
            guard let origin else {
                anchor = lastTick
                index = 1
                nextGrid = lastTick + newInterval
                nextFire = lastTick + newInterval + jitter()
                return
            }
            let next = Self.point(on: origin, newInterval, notBefore: max(lastTick + newInterval, now))
            anchor = next
            index = 0
            nextGrid = next
            nextFire = next + jitter()
            return
        }
        // Overdue (or never fired, paused since start): fire now and lay the new grid from here, so the
        // time spent paused or at the old interval is not counted as missed ticks.
        anchor = now
        index = 0
        nextGrid = now
        nextFire = now
        continueAligned(afterFiringAt: now)
    }
}
