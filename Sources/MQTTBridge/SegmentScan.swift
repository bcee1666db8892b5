/// What one spool segment's bytes hold, read as recovery reads them: the whole frames in order, and the damaged
/// runs between them (``SpoolRecord`` describes the frames). Pure, so that the damage tests can try every byte of
/// a segment in memory as well as through files.
struct SegmentScan: Sendable, Equatable {
    enum Format: Sendable, Equatable {
        /// Frames with a marker: damage is skipped, and reading goes on at the next whole frame.
        case current
        /// Frames of the first format (no marker): reading stops at the first damaged one.
        case legacy
    }

    enum Item: Sendable, Equatable {
        /// A whole record's frame.
        case record(offset: Int, size: Int, sequence: UInt64)
        /// A padding frame: damage an earlier recovery found, counted then.
        case padding(offset: Int, size: Int)
        /// Bytes that hold no whole frame, from where one should have started to the next whole frame (or the end
        /// of the file). `framed`: frames in the run whose header held (their extent is known, their body is
        /// damaged or cut short); `unframedBytes`: the run's bytes outside those frames.
        case damaged(offset: Int, size: Int, framed: Int, unframedBytes: Int)
    }

    var format: Format
    var items: [Item]
    /// Where whole frames end: the file is cut here when damage runs to its end.
    var wholeEnd: Int

    /// Reads `bytes` in the format its first frame has.
    static func scan(_ bytes: [UInt8]) -> SegmentScan {
        if !bytes.starts(with: SpoolRecord.marker), SpoolRecord.Legacy.frame(at: bytes[...]) != nil {
            return legacy(bytes)
        }
        return current(bytes)
    }

    /// Frames with markers: after damage, reading goes on at the next whole frame.
    static func current(_ bytes: [UInt8]) -> SegmentScan {
        var items: [Item] = []
        var offset = 0
        var run: (start: Int, framed: Int, framedBytes: Int)?
        func endRun(at end: Int) {
            guard let open = run else { return }
            items.append(
                .damaged(
                    offset: open.start, size: end - open.start, framed: open.framed,
                    unframedBytes: end - open.start - open.framedBytes))
            run = nil
        }
        while offset < bytes.count {
            let rest = bytes[offset...]
            if let (size, record) = SpoolRecord.frame(at: rest) {
                endRun(at: offset)
                if let record {
                    items.append(.record(offset: offset, size: size, sequence: record.sequence))
                } else {
                    items.append(.padding(offset: offset, size: size))
                }
                offset += size
                continue
            }
            if run == nil { run = (offset, 0, 0) }
            // The next whole frame may begin before the end a held header claims: a write cut short (a full disk)
            // and records appended after it. So the search starts at the next byte, never at the claimed end.
            let next = nextMarker(in: bytes, from: offset + 1) ?? bytes.count
            if let length = SpoolRecord.bodyLength(header: rest) {
                run?.framed += 1
                run?.framedBytes += min(SpoolRecord.headerSize + length, next - offset)
            }
            offset = next
        }
        endRun(at: bytes.count)
        return SegmentScan(format: .current, items: items, wholeEnd: wholeEnd(items, size: bytes.count))
    }

    /// Frames of the first format: whole ones up to the first that is not; the rest is one damaged run.
    static func legacy(_ bytes: [UInt8]) -> SegmentScan {
        var items: [Item] = []
        var offset = 0
        while offset < bytes.count, let (size, record) = SpoolRecord.Legacy.frame(at: bytes[offset...]) {
            items.append(.record(offset: offset, size: size, sequence: record.sequence))
            offset += size
        }
        if offset < bytes.count {
            items.append(
                .damaged(offset: offset, size: bytes.count - offset, framed: 0, unframedBytes: bytes.count - offset))
        }
        return SegmentScan(format: .legacy, items: items, wholeEnd: offset)
    }

    private static func wholeEnd(_ items: [Item], size: Int) -> Int {
        if case .damaged(let offset, _, _, _) = items.last { return offset }
        return size
    }

    /// The offset of the next marker at or after `start`.
    private static func nextMarker(in bytes: [UInt8], from start: Int) -> Int? {
        let marker = SpoolRecord.marker
        var index = start
        while index + marker.count <= bytes.count {
            if bytes[index] == marker[0], bytes[index + 1] == marker[1], bytes[index + 2] == marker[2],
                bytes[index + 3] == marker[3]
            {
                return index
            }
            index += 1
        }
        return nil
    }
}

/// Counts the records that damage cost, across the segments in order.
///
/// A damaged run costs at least one record per frame whose header held, one more when some of its bytes lie
/// outside those, and at least as many as the largest whole frame fits in it. Between two whole records it costs
/// exactly as many as their sequence numbers skip, when that many frames of the sizes seen fill the run (sequence
/// numbers restart with the daemon, so a skip alone proves nothing). Runs with no whole record between them are
/// counted together.
struct DamageCounter {
    /// One damaged run, as recovery reports it.
    struct Report: Sendable, Hashable {
        /// The segment's file name.
        var segment: String
        var offset: Int
        var size: Int
        /// Records lost: `exact`, or the fewest the run can have cost.
        var lost: UInt64
        var exact: Bool
    }

    private enum Event {
        case record(sequence: UInt64, size: Int)
        case damaged(Report, countable: Bool)
    }

    private var events: [Event] = []
    private(set) var reports: [Report] = []

    var lost: UInt64 { reports.reduce(0) { $0 + $1.lost } }

    /// A damaged run after the acknowledged mark; `straddlesMark` when it begins before the mark (then only the
    /// fewest is counted: the records before the mark were delivered).
    mutating func damaged(
        segment: String, offset: Int, size: Int, framed: Int, unframedBytes: Int, straddlesMark: Bool
    ) {
        let fewest = straddlesMark ? 1 : UInt64(framed) + (unframedBytes > 0 ? 1 : 0)
        // Exact when every byte of the run lay in frames whose header held, and none of them before the mark.
        let report = Report(
            segment: segment, offset: offset, size: size, lost: fewest, exact: unframedBytes == 0 && !straddlesMark)
        events.append(.damaged(report, countable: !straddlesMark))
    }

    /// A whole record, in order.
    mutating func record(sequence: UInt64, size: Int) {
        events.append(.record(sequence: sequence, size: size))
    }

    /// Settles every run, once all segments were read (the sizes of all whole frames bound the counts).
    mutating func finish() {
        var smallest = Int.max
        var largest = 0
        for case .record(_, let size) in events {
            smallest = min(smallest, size)
            largest = max(largest, size)
        }
        var previous: UInt64?
        var group: [Report] = []
        var countable = true
        func settle(next: UInt64?) {
            guard !group.isEmpty else { return }
            let bytes = group.reduce(0) { $0 + $1.size }
            let fewest = group.reduce(0) { $0 + $1.lost }
            if group.contains(where: { !$0.exact }) {
                if countable, let previous, let next, next > previous, largest > 0,
                    case let skipped = next - previous - 1, skipped >= fewest,
                    skipped <= UInt64(bytes / smallest), skipped >= UInt64((bytes + largest - 1) / largest)
                {
                    // The skip fills the runs: they lost that many; the last takes what the others' fewest leave.
                    for index in group.indices { group[index].exact = true }
                    group[group.count - 1].lost += skipped - fewest
                } else if countable, largest > 0 {
                    let byBytes = UInt64((bytes + largest - 1) / largest)
                    if byBytes > fewest { group[group.count - 1].lost += byBytes - fewest }
                }
            }
            reports += group
            group.removeAll()
            countable = true
        }
        for event in events {
            switch event {
            case .record(let sequence, _):
                settle(next: sequence)
                previous = sequence
            case .damaged(let report, let isCountable):
                group.append(report)
                if !isCountable { countable = false }
            }
        }
        settle(next: nil)
        events.removeAll()
    }
}
