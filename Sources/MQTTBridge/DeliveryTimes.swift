/// When each record this process spooled was appended, until the broker acknowledges it: the delivery latency the
/// bridge reports, and the age of the oldest record still waiting.
///
/// Entries go in spool order (entry ids only grow), so acknowledging "through" an id pops a prefix. Records found
/// on disk at start have no entry: they count from the bridge's start. At most ``capacity`` entries are kept (a
/// spool of small records held by a broker away for days): beyond it the oldest entries are forgotten, and those
/// records too count from the start.
struct DeliveryTimes: Sendable {
    static let capacity = 1 << 17

    private var entries: [(id: UInt64, at: ContinuousClock.Instant)] = []
    /// The index of the first live entry: popping moves it instead of shifting the array each time.
    private var head = 0
    let started: ContinuousClock.Instant

    init(started: ContinuousClock.Instant) {
        self.started = started
    }

    mutating func spooled(_ id: UInt64, at instant: ContinuousClock.Instant) {
        if entries.count - head >= Self.capacity { head += 1 }
        entries.append((id, instant))
        compactIfHalfEmpty()
    }

    /// The entries through `id` leave; the delivery time of each, at `now`.
    mutating func acknowledged(through id: UInt64, at now: ContinuousClock.Instant) -> [Duration] {
        var times: [Duration] = []
        while head < entries.count, entries[head].id <= id {
            times.append(entries[head].at.duration(to: now))
            head += 1
        }
        compactIfHalfEmpty()
        return times
    }

    /// How long the oldest pending record, `firstPending`, has waited; entries before it are gone (acknowledged
    /// or dropped by a full spool).
    mutating func age(ofOldest firstPending: UInt64, at now: ContinuousClock.Instant) -> Duration {
        while head < entries.count, entries[head].id < firstPending { head += 1 }
        compactIfHalfEmpty()
        guard head < entries.count, entries[head].id == firstPending else { return started.duration(to: now) }
        return entries[head].at.duration(to: now)
    }

    private mutating func compactIfHalfEmpty() {
        if head > 64, head * 2 >= entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }
}
