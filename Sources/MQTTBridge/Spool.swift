#if canImport(Glibc)
    import Glibc
#endif

/// The bridge's bounded, append-only, crash-safe store of records not yet acknowledged by the broker.
///
/// ## Files (in the spool directory)
/// - `segment-<16 hex digits>.spool`: records, appended in submit order, each framed as ``SpoolRecord``
///   describes (marker, length, checksums, body). Segment numbers only grow. A new segment is begun when the
///   current one would pass an eighth of the limit (``segmentLimit``), so that dropping the oldest one loses at
///   most that much.
/// - `acknowledged`: the acknowledged mark, rewritten in place after each acknowledgement (not synced: losing it
///   only replays records again). Two identical 40-byte copies, so that damage to one leaves the other: magic
///   `KAA2`, a generation that grows with each write, the segment and offset of the first record not yet
///   acknowledged, the number of records ever dropped, and a CRC-32 of the 36 bytes before it. The copy with the
///   highest generation whose checksum holds is the mark; with neither (nor the 32-byte `KAA1` mark of the first
///   format), nothing is acknowledged: everything on disk is replayed.
///
/// ## Durability
/// ``append(_:)`` returns after `write(2)` (and `fdatasync` per ``BridgeConfiguration/SyncPolicy``), so a record
/// the caller was told is spooled survives the process being killed. ``appendDeferringSync(_:)`` leaves that
/// `fdatasync` to its caller (``PendingSync``), to be made outside the lock that guards the spool: the record can
/// be read and published meanwhile, so the broker may acknowledge a record before it is durable here (after a
/// power loss it is then missing from the spool, which is fine: the broker has it). On open, every segment is scanned
/// (``SegmentScan``): whole records before the acknowledged position are skipped, the rest are pending, in order.
/// Delivery is at least once: a record in flight when the process dies is sent again.
///
/// ## Damage
/// A flipped bit, a torn write or a zeroed flash page costs the records it touched and no other: the scan goes on at
/// the next whole frame. Recovery overwrites each damaged run between whole frames with a padding frame of the same
/// size (offsets, and so the acknowledged mark, stay valid; the file is replaced by a rename, so a crash leaves the
/// old or the new) and cuts damage that runs to the end of a file. Each run is reported once (``damage``), and the
/// records it cost (``DamageCounter``) are added to ``dropped`` and ``corrupt``. A record that no longer reads back
/// whole at delivery is counted the same way (``loseUnreadableRecord()``).
///
/// ## Bound
/// When the segments exceed ``limit`` bytes, whole oldest segments are deleted; their unacknowledged records
/// are counted in ``dropped`` (kept in `acknowledged`).
///
/// Not thread-safe: the bridge holds it under its lock.
final class Spool {
    /// Where a pending record is; `id` orders entries and names one across drops.
    struct Entry: Sendable, Hashable {
        var id: UInt64
        var segment: UInt64
        var offset: Int
        var size: Int
    }

    /// A route by which pending records go to the broker (``outForDelivery``).
    enum Delivery: Sendable, Equatable {
        case none
        /// A batch read back by the bridge's delivery task.
        case batch
        /// The one pending record, handed straight to the client by `submit` (its entry id).
        case direct(UInt64)
    }

    let directory: String
    let limit: Int
    let segmentLimit: Int
    let syncPolicy: BridgeConfiguration.SyncPolicy
    private(set) var pending: [Entry] = []
    private var pendingStart = 0
    private struct Segment {
        var number: UInt64
        var descriptor: Int32
        var size: Int
        /// Written in the first format: read, never appended to.
        var legacy: Bool = false
        /// Never appended to again: a write to it failed and what it left could not be cut off.
        var sealed: Bool = false
    }

    private var segments: [Segment] = []
    private var nextEntryID: UInt64 = 0
    private var unsynced = 0
    private var acknowledgedDescriptor: Int32 = -1
    private(set) var dropped: UInt64 = 0
    /// Records lost to damage (also counted in ``dropped``).
    private(set) var corrupt: UInt64 = 0
    /// Records that could not be written (a full disk; also counted in ``dropped``), since the spool was opened.
    private(set) var unwritten: UInt64 = 0
    /// The damaged runs the last recovery found, one each.
    private(set) var damage: [DamageCounter.Report] = []
    /// Whether recovery found the acknowledged mark damaged in both copies (everything was then replayed).
    private(set) var acknowledgedMarkLost = false
    private var acknowledgedGeneration: UInt64 = 0
    /// Which pending records are out with the MQTT client now. The bridge sends by one route at a time, so that
    /// records reach the broker in order and the acknowledged mark moves over a prefix.
    var outForDelivery = Delivery.none
    private(set) var appended: UInt64 = 0
    private(set) var delivered: UInt64 = 0

    init(directory: String, limit: Int, syncPolicy: BridgeConfiguration.SyncPolicy) throws(BridgeError) {
        self.directory = directory
        self.limit = max(limit, 4_096)
        self.segmentLimit = max(self.limit / 8, 512)
        self.syncPolicy = syncPolicy
        try SpoolFiles.makeDirectory(directory)
        acknowledgedDescriptor = try SpoolFiles.open(acknowledgedPath, O_RDWR | O_CREAT)
        do {
            try recover()
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    func close() {
        for segment in segments { SpoolFiles.close(segment.descriptor) }
        segments.removeAll()
        if acknowledgedDescriptor >= 0 { SpoolFiles.close(acknowledgedDescriptor) }
        acknowledgedDescriptor = -1
    }

    var pendingCount: Int { pending.count - pendingStart }
    var bytes: Int { segments.reduce(0) { $0 + $1.size } }
    var first: Entry? { pendingStart < pending.count ? pending[pendingStart] : nil }

    /// The pending entries after `entry` (or from the first), at most `count` of them, in order.
    func entries(after id: UInt64?, count: Int) -> ArraySlice<Entry> {
        var start = pendingStart
        if let id { while start < pending.count, pending[start].id <= id { start += 1 } }
        return pending[start..<(start + min(count, pending.count - start))]
    }

    // MARK: Appending

    /// The `fdatasync` an ``appendDeferringSync(_:)`` left to its caller, on a duplicate of the segment's
    /// descriptor (the spool may retire the segment meanwhile). ``perform()`` it exactly once.
    struct PendingSync: Sendable {
        let descriptor: Int32
        let path: String

        /// `fdatasync`, then closes the duplicate; on return the record is durable.
        func perform() throws(BridgeError) {
            defer { SpoolFiles.close(descriptor) }
            try SpoolFiles.dataSync(descriptor, path: path)
        }
    }

    /// Appends `record`; on return it is in the file (and synced per the policy). Drops the oldest segments
    /// when the bound is passed; returns how many unacknowledged records that dropped.
    @discardableResult
    func append(_ record: SpoolRecord) throws(BridgeError) -> UInt64 {
        let index = try write(record)
        if syncDue { try sync(index) }
        return try enforceLimit()
    }

    /// Appends `record` like ``append(_:)``, but when the policy asks for a sync now, hands it to the caller
    /// instead of making it: the record is in the file (and readable) on return, durable once the returned
    /// ``PendingSync`` was performed.
    func appendDeferringSync(_ record: SpoolRecord) throws(BridgeError) -> (dropped: UInt64, sync: PendingSync?) {
        let index = try write(record)
        var pending: PendingSync?
        if syncDue {
            let path = segmentPath(segments[index].number)
            let copy = fcntl(segments[index].descriptor, F_DUPFD_CLOEXEC, 0)
            guard copy >= 0 else { throw SpoolFiles.failure("fcntl(F_DUPFD_CLOEXEC)", path) }
            pending = PendingSync(descriptor: copy, path: path)
            unsynced = 0
        }
        do {
            return (try enforceLimit(), pending)
        } catch {
            if let pending { SpoolFiles.close(pending.descriptor) }
            throw error
        }
    }

    private var syncDue: Bool {
        switch syncPolicy {
        case .everyRecord: true
        case .everyRecords(let count): unsynced >= max(count, 1)
        case .never: false
        }
    }

    /// Writes `record` at the end of the newest segment (beginning a new one when it would pass
    /// ``segmentLimit``) and makes it pending; returns the segment's index. A record that could not be written
    /// (a full disk) is lost: counted in ``dropped`` and ``unwritten``, the error marked
    /// ``BridgeError/recordLost``.
    private func write(_ record: SpoolRecord) throws(BridgeError) -> Int {
        do {
            return try writeOrFail(record)
        } catch {
            dropped += 1
            unwritten += 1
            var lost = error
            lost.recordLost = true
            throw lost
        }
    }

    private func writeOrFail(_ record: SpoolRecord) throws(BridgeError) -> Int {
        let bytes = record.encoded()
        guard bytes.count <= segmentLimit else {
            throw BridgeError(
                code: .invalidConfiguration,
                message: "a record of \(bytes.count) bytes does not fit the spool's segments of \(segmentLimit) bytes "
                    + "(an eighth of its limit of \(limit) bytes)")
        }
        if segments.isEmpty || segments[segments.count - 1].legacy || segments[segments.count - 1].sealed
            || segments[segments.count - 1].size + bytes.count > segmentLimit
        {
            try openSegment(number: (segments.last?.number ?? 0) + 1)
        }
        let index = segments.count - 1
        let path = segmentPath(segments[index].number)
        do {
            try SpoolFiles.writeAll(segments[index].descriptor, bytes, path: path)
        } catch {
            // A write cut short (a full disk) leaves part of a frame, and the next record would land after it while
            // its entry pointed before it: cut the part off, or append no more to this segment.
            do {
                try SpoolFiles.truncate(segments[index].descriptor, to: segments[index].size, path: path)
            } catch {
                segments[index].sealed = true
            }
            throw error
        }
        let entry = Entry(
            id: nextEntryID, segment: segments[index].number, offset: segments[index].size, size: bytes.count)
        nextEntryID += 1
        segments[index].size += bytes.count
        pending.append(entry)
        appended += 1
        unsynced += 1
        return index
    }

    private func sync(_ index: Int) throws(BridgeError) {
        try SpoolFiles.dataSync(segments[index].descriptor, path: segmentPath(segments[index].number))
        unsynced = 0
    }

    private func openSegment(number: UInt64) throws(BridgeError) {
        if let last = segments.last, unsynced > 0, syncPolicy != .never {
            try SpoolFiles.dataSync(last.descriptor, path: segmentPath(last.number))
            unsynced = 0
        }
        let path = segmentPath(number)
        let descriptor = try SpoolFiles.open(path, O_RDWR | O_CREAT | O_APPEND)
        segments.append(Segment(number: number, descriptor: descriptor, size: 0))
        // The new name must survive a power loss too, or its synced records would be lost with it.
        if syncPolicy != .never { try SpoolFiles.syncDirectory(directory) }
    }

    /// Deletes the oldest segments while the spool is over its limit (keeping the one being written).
    private func enforceLimit() throws(BridgeError) -> UInt64 {
        var droppedNow: UInt64 = 0
        while bytes > limit, segments.count > 1 {
            let oldest = segments.removeFirst()
            SpoolFiles.close(oldest.descriptor)
            try SpoolFiles.remove(segmentPath(oldest.number))
            while let first, first.segment == oldest.number {
                pendingStart += 1
                droppedNow += 1
            }
        }
        if droppedNow > 0 {
            dropped += droppedNow
            compact()
            try writeAcknowledged()
        }
        return droppedNow
    }

    // MARK: Acknowledging

    /// The broker acknowledged the entry `id`: it is no longer pending (a no-op when it was dropped meanwhile
    /// or is not first). Segments left with nothing pending are deleted.
    func acknowledge(_ id: UInt64) throws(BridgeError) {
        guard let first, first.id == id else { return }
        try acknowledge(through: id)
    }

    /// The broker acknowledged every pending entry up to `id` (included): they are no longer pending, with one
    /// write of the acknowledged mark (a no-op when none is pending at or before `id`, e.g. all dropped
    /// meanwhile). Segments left with nothing pending are deleted.
    func acknowledge(through id: UInt64) throws(BridgeError) {
        var count: UInt64 = 0
        while let first, first.id <= id {
            pendingStart += 1
            count += 1
        }
        guard count > 0 else { return }
        delivered += count
        while segments.count > 1, segments[0].number < (self.first?.segment ?? segments[segments.count - 1].number) {
            let oldest = segments.removeFirst()
            SpoolFiles.close(oldest.descriptor)
            try SpoolFiles.remove(segmentPath(oldest.number))
        }
        compact()
        try writeAcknowledged()
    }

    /// The record of a pending entry, read back from its segment.
    func read(_ entry: Entry) throws(BridgeError) -> SpoolRecord? {
        guard let segment = segments.first(where: { $0.number == entry.segment }) else { return nil }
        let path = segmentPath(entry.segment)
        let bytes = try SpoolFiles.read(segment.descriptor, count: entry.size, at: entry.offset, path: path)
        return Self.record(bytes[...], legacy: segment.legacy)
    }

    /// A pending record that no longer reads back whole (damaged since the spool was opened) is lost: counted in
    /// ``dropped`` and ``corrupt``, written down with the next acknowledgement.
    func loseUnreadableRecord() {
        dropped += 1
        corrupt += 1
    }

    /// The records of `entries` (pending ones, in order), nil for one that no longer reads back whole: one `pread`
    /// per run of entries that follow each other in a segment, rather than one per record.
    func read(_ entries: ArraySlice<Entry>) throws(BridgeError) -> [SpoolRecord?] {
        var records: [SpoolRecord?] = []
        records.reserveCapacity(entries.count)
        var start = entries.startIndex
        while start < entries.endIndex {
            let first = entries[start]
            var end = start + 1
            var size = first.size
            while end < entries.endIndex, entries[end].segment == first.segment,
                entries[end].offset == first.offset + size
            {
                size += entries[end].size
                end += 1
            }
            if let segment = segments.first(where: { $0.number == first.segment }) {
                let bytes = try SpoolFiles.read(
                    segment.descriptor, count: size, at: first.offset, path: segmentPath(first.segment))
                var offset = 0
                for entry in entries[start..<end] {
                    let stop = min(offset + entry.size, bytes.count)
                    records.append(Self.record(bytes[min(offset, stop)..<stop], legacy: segment.legacy))
                    offset += entry.size
                }
            } else {
                records.append(contentsOf: repeatElement(nil, count: end - start))
            }
            start = end
        }
        return records
    }

    /// The record framed by exactly `bytes`, nil when it does not read back whole.
    private static func record(_ bytes: ArraySlice<UInt8>, legacy: Bool) -> SpoolRecord? {
        guard legacy else { return SpoolRecord.decode(frame: bytes) }
        guard let (size, record) = SpoolRecord.Legacy.frame(at: bytes), size == bytes.count else { return nil }
        return record
    }

    /// Forgets the consumed front of `pending` now and then, so the array does not grow without end.
    private func compact() {
        if pendingStart > 1_024, pendingStart * 2 > pending.count {
            pending.removeFirst(pendingStart)
            pendingStart = 0
        }
    }

    // MARK: The acknowledged file

    private var acknowledgedPath: String { directory + "/acknowledged" }

    private func segmentPath(_ number: UInt64) -> String {
        directory + "/" + Self.segmentName(number)
    }

    static func segmentName(_ number: UInt64) -> String {
        let hex = String(number, radix: 16)
        return "segment-" + String(repeating: "0", count: max(16 - hex.count, 0)) + hex + ".spool"
    }

    private struct Mark {
        var generation: UInt64
        var segment: UInt64
        var offset: Int
        var dropped: UInt64
    }

    private static let markSize = 40

    private func writeAcknowledged() throws(BridgeError) {
        let position = first.map { ($0.segment, $0.offset) } ?? (segments.last.map { ($0.number, $0.size) } ?? (0, 0))
        acknowledgedGeneration += 1
        var copy = Array("KAA2".utf8)
        appendLittleEndian(acknowledgedGeneration, to: &copy)
        appendLittleEndian(position.0, to: &copy)
        appendLittleEndian(UInt64(position.1), to: &copy)
        appendLittleEndian(dropped, to: &copy)
        appendLittleEndian(CRC32.checksum(copy), to: &copy)
        try SpoolFiles.writeAll(acknowledgedDescriptor, copy + copy, at: 0, path: acknowledgedPath)
    }

    /// The acknowledged mark: the newer whole copy, or the first format's mark; nil when there is none (and
    /// ``acknowledgedMarkLost`` when there was one, damaged).
    private func readAcknowledged() throws(BridgeError) -> Mark? {
        let bytes = try SpoolFiles.read(acknowledgedDescriptor, count: 2 * Self.markSize, at: 0, path: acknowledgedPath)
        let copies = [0, Self.markSize].compactMap { start -> Mark? in
            guard bytes.count >= start + Self.markSize else { return nil }
            let copy = bytes[start..<(start + Self.markSize)]
            guard copy.prefix(4).elementsEqual("KAA2".utf8),
                CRC32.checksum(copy.prefix(36)) == readInteger(copy, at: start + 36, as: UInt32.self)
            else { return nil }
            return Mark(
                generation: readInteger(copy, at: start + 4, as: UInt64.self),
                segment: readInteger(copy, at: start + 12, as: UInt64.self),
                offset: Int(clamping: readInteger(copy, at: start + 20, as: UInt64.self)),
                dropped: readInteger(copy, at: start + 28, as: UInt64.self))
        }
        if let newest = copies.max(by: { $0.generation < $1.generation }) {
            acknowledgedGeneration = newest.generation
            return newest
        }
        if bytes.count >= 32, bytes[0..<4].elementsEqual("KAA1".utf8),
            CRC32.checksum(bytes[0..<28]) == readInteger(bytes[...], at: 28, as: UInt32.self)
        {
            return Mark(
                generation: 0, segment: readInteger(bytes[...], at: 4, as: UInt64.self),
                offset: Int(clamping: readInteger(bytes[...], at: 12, as: UInt64.self)),
                dropped: readInteger(bytes[...], at: 20, as: UInt64.self))
        }
        acknowledgedMarkLost = !bytes.isEmpty
        return nil
    }

    // MARK: Recovery

    /// Scans the segments on disk: whole records at or after the acknowledged position become pending; damage is
    /// counted, padded over or cut off (see "Damage" above).
    private func recover() throws(BridgeError) {
        let mark = try readAcknowledged()
        dropped = mark?.dropped ?? 0
        let names = try SpoolFiles.list(directory)
        // A padded copy that a crash kept from its rename: the damaged segment it was made from is still there.
        for name in names where name.hasPrefix("segment-") && name.hasSuffix(".spool.new") {
            try SpoolFiles.remove(directory + "/" + name)
        }
        let numbers = names.compactMap { name -> UInt64? in
            guard name.hasPrefix("segment-"), name.hasSuffix(".spool") else { return nil }
            return UInt64(name.dropFirst(8).dropLast(6), radix: 16)
        }.sorted()
        var counter = DamageCounter()
        for number in numbers {
            let path = segmentPath(number)
            if let mark, number < mark.segment {
                try SpoolFiles.remove(path)
                continue
            }
            var contents = try SpoolFiles.readFile(path) ?? []
            let scan = SegmentScan.scan(contents)
            let skipBefore = mark.flatMap { $0.segment == number ? $0.offset : nil } ?? 0
            var padded = false
            for item in scan.items {
                switch item {
                case .record(let offset, let size, let sequence):
                    counter.record(sequence: sequence, size: size)
                    if offset >= skipBefore {
                        pending.append(Entry(id: nextEntryID, segment: number, offset: offset, size: size))
                        nextEntryID += 1
                    }
                case .padding:
                    break
                case .damaged(let offset, let size, let framed, let unframedBytes):
                    if offset + size > skipBefore {
                        counter.damaged(
                            segment: Self.segmentName(number), offset: offset, size: size, framed: framed,
                            unframedBytes: unframedBytes, straddlesMark: offset < skipBefore)
                    }
                    if scan.format == .current, offset < scan.wholeEnd, size >= SpoolRecord.minimumSize {
                        contents.replaceSubrange(offset..<(offset + size), with: SpoolRecord.padding(size: size))
                        padded = true
                    }
                }
            }
            let cut = scan.wholeEnd < contents.count
            if padded {
                // A new file in one rename: a crash leaves the damaged one (found again) or the padded one.
                contents.removeSubrange(scan.wholeEnd...)
                try SpoolFiles.replace(path, with: contents, directory: directory, sync: syncPolicy != .never)
            }
            let descriptor = try SpoolFiles.open(path, O_RDWR | O_APPEND)
            segments.append(
                Segment(number: number, descriptor: descriptor, size: scan.wholeEnd, legacy: scan.format == .legacy))
            // New records must follow whole ones: damage that runs to the end of the file is cut.
            if cut, !padded { try SpoolFiles.truncate(descriptor, to: scan.wholeEnd, path: path) }
        }
        counter.finish()
        damage = counter.reports
        corrupt = counter.lost
        dropped += counter.lost
        // The broker can acknowledge a record before its deferred sync has made it durable: after a power loss
        // the acknowledged position may then lie past the end of what survived. Records appended there from now
        // on would be skipped by the next recovery, so the position moves back to the end. A damaged mark is
        // written whole again, and so is the dropped count when damage added to it.
        let markPastTheEnd =
            mark.map { mark in segments.last.map { $0.number == mark.segment && mark.offset > $0.size } ?? false }
            ?? false
        if markPastTheEnd || acknowledgedMarkLost || counter.lost > 0 { try writeAcknowledged() }
    }
}
