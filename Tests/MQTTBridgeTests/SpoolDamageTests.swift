import Foundation
import LocalServices
import TestHarness
import Testing

@testable import MQTTBridge

#if canImport(Glibc)
    import Glibc
#endif

/// Damage to the spool's files (flash that flips bits, tears writes, zeroes a page on power loss) costs the
/// records it touched and no other, and every record lost is counted.
///
/// The exhaustive cases reopen a real spool on real files, one case each. CI flips one bit of every byte of a
/// 100-record segment (the bit rotates with the offset); `KEEPALIVE_SPOOL_DAMAGE=every-bit` (`make soak`) flips
/// each of the eight.
@Suite struct SpoolDamageTests {
    static let devices = ["greenhouse-north", "bench"]

    /// Every byte, or every 32nd under a sanitizer: there the cases look for memory and thread errors, which a
    /// sample finds as well (CI's sanitizer stages run the whole suite, and at every eighth byte ThreadSanitizer's
    /// stage took 2.5 minutes longer).
    static let step = runningUnderThreadSanitizer || runningUnderAddressSanitizer ? 32 : 1

    /// Where the spools are written: /dev/shm where it is a directory. Each case reopens a spool whose recovery
    /// writes its counts with fdatasync and a directory fsync, and on a disk those waited for the journal: on
    /// /tmp the four exhaustive tests took 88 s of wall time for 69 s of CPU on two cores. What they test is
    /// the spool's reading of damaged bytes, which a file system in memory keeps as a disk does.
    static let scratchParent: String = {
        var status = stat()
        return stat("/dev/shm", &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR ? "/dev/shm" : "/tmp"
    }()

    static func record(_ sequence: UInt64) -> SpoolRecord {
        let device = devices[Int(sequence) % devices.count]
        return SpoolRecord(
            sequence: sequence, succeeded: sequence % 5 != 0, device: device,
            payload: recordPayload(sequence, device: device, temperature: 20 + Double(sequence % 7) / 4))
    }

    /// A spool of records 0..<count in one segment, as the bridge writes it; the segment's bytes and where each
    /// record's frame lies.
    struct Written: Sendable {
        var directory: String
        var segmentName: String
        var bytes: [UInt8]
        var frames: [Range<Int>]
    }

    static func write(_ count: Int, prefix: String) throws -> Written {
        let directory = try makeTemporaryDirectory(prefix: prefix, under: scratchParent)
        let spool = try Spool(directory: directory, limit: 64 << 20, syncPolicy: .never)
        var frames: [Range<Int>] = []
        for sequence in 0..<UInt64(count) {
            let start = frames.last?.upperBound ?? 0
            frames.append(start..<(start + record(sequence).encoded().count))
            try spool.append(record(sequence))
        }
        spool.close()
        let name = try #require(
            try FileManager.default.contentsOfDirectory(atPath: directory).first { $0.hasPrefix("segment-") })
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name)))
        #expect(bytes.count == frames.last?.upperBound, "one segment holds every record")
        return Written(directory: directory, segmentName: name, bytes: bytes, frames: frames)
    }

    /// What a spool opened on these files delivers and counts.
    struct Reopened: Sendable {
        var sequences: [UInt64]
        var dropped: UInt64
        var corrupt: UInt64
        var damage: [DamageCounter.Report]
    }

    /// Replaces the spool's files with `segment` (and `mark` as the acknowledged file, or none) and opens it.
    static func reopen(_ written: Written, segment: [UInt8], mark: [UInt8]? = nil) throws -> Reopened {
        for name in try FileManager.default.contentsOfDirectory(atPath: written.directory) {
            try FileManager.default.removeItem(atPath: written.directory + "/" + name)
        }
        try Data(segment).write(to: URL(fileURLWithPath: written.directory + "/" + written.segmentName))
        if let mark { try Data(mark).write(to: URL(fileURLWithPath: written.directory + "/acknowledged")) }
        let spool = try Spool(directory: written.directory, limit: 64 << 20, syncPolicy: .never)
        defer { spool.close() }
        let records = try spool.read(spool.entries(after: nil, count: .max))
        return Reopened(
            sequences: records.map { $0?.sequence ?? .max }, dropped: spool.dropped, corrupt: spool.corrupt,
            damage: spool.damage)
    }

    /// The records whose frames overlap `damaged`.
    static func touched(_ written: Written, _ damaged: Range<Int>) -> Set<UInt64> {
        Set(written.frames.indices.filter { written.frames[$0].overlaps(damaged) }.map { UInt64($0) })
    }

    /// Tallies cases, and reports any whose outcome was not the one expected (the first few in full).
    struct Tally: Sendable {
        let name: String
        var cases = 0
        var unexpected: [String] = []

        init(_ name: String) { self.name = name }

        mutating func check(_ ok: Bool, _ description: @autoclosure () -> String) {
            cases += 1
            if !ok { unexpected.append(description()) }
        }

        func finish() {
            print("spool damage (\(name)): \(cases) cases, \(unexpected.count) unexpected losses")
            #expect(unexpected.isEmpty, "\(unexpected.count) of \(cases): \(unexpected.prefix(5))")
        }
    }

    // MARK: The scenario of the issue

    @Test func aBitFlippedInTheMiddleOfASegmentCostsOneRecordWhichIsCountedOnce() throws {
        // 12 records of two devices, one bit flipped about half way in.
        let written = try Self.write(12, prefix: "spool-damage")
        defer { removeDirectory(written.directory) }
        var damaged = written.bytes
        let offset = written.bytes.count / 2
        damaged[offset] ^= 0x08
        let victim = try #require(written.frames.firstIndex { $0.contains(offset) })

        let reopened = try Self.reopen(written, segment: damaged)
        #expect(reopened.sequences == (0..<12).filter { $0 != victim }.map(UInt64.init))
        #expect(reopened.dropped == 1 && reopened.corrupt == 1)
        #expect(
            reopened.damage == [
                DamageCounter.Report(
                    segment: written.segmentName, offset: written.frames[victim].lowerBound,
                    size: written.frames[victim].count, lost: 1, exact: true)
            ])

        // Recovery padded the damage over: a second open reads the same records and counts nothing more.
        let spool = try Spool(directory: written.directory, limit: 64 << 20, syncPolicy: .never)
        defer { spool.close() }
        #expect(try spool.read(spool.entries(after: nil, count: .max)).map { $0?.sequence } == reopened.sequences)
        #expect(spool.dropped == 1 && spool.corrupt == 0 && spool.damage.isEmpty)
        // New records follow, and the padding keeps every offset: the size did not change.
        let size = try #require(
            try FileManager.default.attributesOfItem(
                atPath: written.directory + "/"
                    + written.segmentName)[.size] as? Int)
        #expect(size == written.bytes.count)
    }

    @Test func aRecordDamagedAfterTheSpoolOpenedIsCountedWhenItIsRead() throws {
        let written = try Self.write(5, prefix: "spool-damage")
        defer { removeDirectory(written.directory) }
        let spool = try Spool(directory: written.directory, limit: 64 << 20, syncPolicy: .never)
        defer { spool.close() }
        // The flash flips a bit under the open spool.
        let descriptor = open(written.directory + "/" + written.segmentName, O_RDWR)
        #expect(descriptor >= 0)
        var byte: UInt8 = written.bytes[written.frames[2].lowerBound + 30] ^ 0x01
        #expect(pwrite(descriptor, &byte, 1, off_t(written.frames[2].lowerBound + 30)) == 1)
        close(descriptor)
        let entries = spool.entries(after: nil, count: .max)
        let records = try spool.read(entries)
        #expect(records.map { $0?.sequence } == [0, 1, nil, 3, 4])
        spool.loseUnreadableRecord()
        try spool.acknowledge(through: entries[entries.startIndex + 2].id)
        #expect(spool.dropped == 1 && spool.corrupt == 1)
        spool.close()
        let again = try Spool(directory: written.directory, limit: 64 << 20, syncPolicy: .never)
        defer { again.close() }
        #expect(again.dropped == 1, "the count was written with the acknowledgement")
        #expect(try again.read(again.entries(after: nil, count: .max)).map { $0?.sequence } == [3, 4])
    }

    // MARK: Exhaustive damage

    @Test func aFlippedBitAnywhereCostsOnlyTheRecordItIsIn() async throws {
        let everyBit = ProcessInfo.processInfo.environment["KEEPALIVE_SPOOL_DAMAGE"] == "every-bit"
        let written = try Self.write(100, prefix: "spool-damage")
        defer { removeDirectory(written.directory) }
        let tally = try await onOwnThread {
            var tally = Tally(everyBit ? "every bit of a 100-record segment" : "a bit of every byte, 100 records")
            for offset in stride(from: 0, to: written.bytes.count, by: Self.step) {
                for bit in everyBit ? Array(0..<8) : [offset % 8] {
                    var damaged = written.bytes
                    damaged[offset] ^= UInt8(1 << bit)
                    let lost = Self.touched(written, offset..<(offset + 1))
                    let reopened = try Self.reopen(written, segment: damaged)
                    let expected = (0..<100).map(UInt64.init).filter { !lost.contains($0) }
                    tally.check(
                        reopened.sequences == expected && reopened.dropped == 1,
                        "bit \(bit) of byte \(offset): delivered \(reopened.sequences.count), "
                            + "dropped \(reopened.dropped)")
                }
            }
            return tally
        }
        tally.finish()
    }

    @Test func aZeroedFlashPageAnywhereCostsOnlyTheRecordsItOverlaps() async throws {
        let written = try Self.write(100, prefix: "spool-damage")
        defer { removeDirectory(written.directory) }
        // Pages where flash has them (multiples of 4 KiB), and starting anywhere else, every 61 bytes.
        let size = written.bytes.count
        let anywhere = Self.step == 1 ? 61 : 61 * 8
        let starts = Set(Array(stride(from: 0, to: size, by: 4_096)) + stride(from: 0, to: size, by: anywhere)).sorted()
        let tally = try await onOwnThread {
            var tally = Tally("a zeroed 4-KiB page, 100 records")
            for start in starts {
                let page = start..<min(start + 4_096, size)
                var damaged = written.bytes
                damaged.replaceSubrange(page, with: repeatElement(0, count: page.count))
                let lost = Self.touched(written, page)
                let reopened = try Self.reopen(written, segment: damaged)
                let expected = (0..<100).map(UInt64.init).filter { !lost.contains($0) }
                // Between two whole records the count is exact; at an end of the spool it is the fewest possible.
                let between = !lost.contains(0) && !lost.contains(99)
                let fewest: UInt64 = between ? UInt64(lost.count) : 1
                tally.check(
                    reopened.sequences == expected && (fewest...UInt64(lost.count)).contains(reopened.dropped),
                    "page at \(start): delivered \(reopened.sequences.count) of \(expected.count), "
                        + "dropped \(reopened.dropped) of \(lost.count) lost")
            }
            return tally
        }
        tally.finish()
    }

    @Test func aSegmentCutAtAnyOffsetKeepsEveryWholeRecordBeforeTheCut() async throws {
        let written = try Self.write(100, prefix: "spool-damage")
        defer { removeDirectory(written.directory) }
        let tally = try await onOwnThread {
            var tally = Tally("a segment cut at every offset, 100 records")
            for cut in stride(from: 0, through: written.bytes.count, by: Self.step) {
                let whole = written.frames.prefix { $0.upperBound <= cut }.count
                let torn = written.frames.contains { $0.lowerBound < cut && cut < $0.upperBound }
                let reopened = try Self.reopen(written, segment: Array(written.bytes[0..<cut]))
                tally.check(
                    reopened.sequences == (0..<UInt64(whole)).map { $0 } && reopened.dropped == (torn ? 1 : 0),
                    "cut at \(cut): delivered \(reopened.sequences.count) of \(whole), dropped \(reopened.dropped)")
            }
            return tally
        }
        tally.finish()
    }

    @Test func theAcknowledgedMarkSurvivesAFlippedBitAnywhereInIt() async throws {
        let written = try Self.write(20, prefix: "spool-damage")
        defer { removeDirectory(written.directory) }
        // Acknowledge 7 records, and keep the mark that wrote.
        let spool = try Spool(directory: written.directory, limit: 64 << 20, syncPolicy: .never)
        try spool.acknowledge(through: try #require(spool.entries(after: nil, count: 7).last).id)
        spool.close()
        let mark = [UInt8](try Data(contentsOf: URL(fileURLWithPath: written.directory + "/acknowledged")))
        #expect(mark.count == 80)
        let tally = try await onOwnThread {
            var tally = Tally("a bit of the acknowledged mark")
            for offset in stride(from: 0, to: mark.count, by: Self.step == 1 ? 1 : 4) {
                for bit in 0..<8 {
                    var damaged = mark
                    damaged[offset] ^= UInt8(1 << bit)
                    let reopened = try Self.reopen(written, segment: written.bytes, mark: damaged)
                    tally.check(
                        reopened.sequences == Array(7..<20) && reopened.dropped == 0,
                        "bit \(bit) of byte \(offset): delivered from \(reopened.sequences.first ?? 0)")
                }
            }
            return tally
        }
        tally.finish()
        // Both copies gone: nothing counts as acknowledged, everything is sent again, and the spool says so.
        let reopened = try Self.reopen(written, segment: written.bytes, mark: [UInt8](repeating: 0xAA, count: 80))
        #expect(reopened.sequences == Array(0..<20))
    }

    @Test func aFrameCutShortWithRecordsAppendedAfterItCostsItselfOnly() {
        // A full disk cut record 1 short after its header; once there was room, records 2 and 3 followed it.
        let frames = (0..<UInt64(4)).map { Self.record($0).encoded() }
        let bytes = frames[0] + frames[1].prefix(frames[1].count / 2) + frames[2] + frames[3]
        let cut = frames[1].count / 2
        let second = frames[0].count + cut
        let expected: [SegmentScan.Item] = [
            .record(offset: 0, size: frames[0].count, sequence: 0),
            .damaged(offset: frames[0].count, size: cut, framed: 1, unframedBytes: 0),
            .record(offset: second, size: frames[2].count, sequence: 2),
            .record(offset: second + frames[2].count, size: frames[3].count, sequence: 3),
        ]
        #expect(SegmentScan.scan(bytes).items == expected)
    }

    // MARK: Counting

    @Test func damageAcrossSeveralRecordsIsCountedFromTheSequenceNumbersAround() {
        var counter = DamageCounter()
        counter.record(sequence: 4, size: 100)
        counter.damaged(segment: "s", offset: 100, size: 210, framed: 1, unframedBytes: 110, straddlesMark: false)
        counter.record(sequence: 7, size: 100)
        // A restart between two runs: sequence numbers start again, and prove nothing.
        counter.damaged(segment: "s", offset: 410, size: 120, framed: 0, unframedBytes: 120, straddlesMark: false)
        counter.record(sequence: 0, size: 110)
        counter.damaged(segment: "s", offset: 640, size: 40, framed: 0, unframedBytes: 40, straddlesMark: false)
        counter.finish()
        #expect(counter.reports.map(\.lost) == [2, 2, 1])
        #expect(counter.reports.map(\.exact) == [true, false, false])
        #expect(counter.lost == 5)
    }

    // MARK: The first format

    @Test func aSegmentOfTheFirstFormatIsStillDeliveredAndNeverAppendedTo() throws {
        let directory = try makeTemporaryDirectory(prefix: "spool-damage")
        defer { removeDirectory(directory) }
        // Frames as the spool wrote them before the marker: length, CRC-32 of the body, body.
        var legacy: [UInt8] = []
        for sequence in 0..<UInt64(4) {
            let frame = Self.record(sequence).encoded()
            let body = Array(frame[SpoolRecord.headerSize...])
            appendLittleEndian(UInt32(body.count), to: &legacy)
            appendLittleEndian(CRC32.checksum(body), to: &legacy)
            legacy += body
        }
        try Data(legacy).write(to: URL(fileURLWithPath: directory + "/" + Spool.segmentName(1)))
        var mark = Array("KAA1".utf8)
        appendLittleEndian(UInt64(1), to: &mark)
        appendLittleEndian(UInt64(0), to: &mark)
        appendLittleEndian(UInt64(3), to: &mark)
        appendLittleEndian(CRC32.checksum(mark), to: &mark)
        try Data(mark).write(to: URL(fileURLWithPath: directory + "/acknowledged"))

        let spool = try Spool(directory: directory, limit: 64 << 20, syncPolicy: .never)
        #expect(spool.dropped == 3, "the first format's mark is read")
        try spool.append(Self.record(4))
        #expect(try spool.read(spool.entries(after: nil, count: .max)).map { $0?.sequence } == [0, 1, 2, 3, 4])
        spool.close()
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("segment-") }
        #expect(Set(names) == [Spool.segmentName(1), Spool.segmentName(2)], "record 4 began a segment of its own")
        let again = try Spool(directory: directory, limit: 64 << 20, syncPolicy: .never)
        defer { again.close() }
        #expect(try again.read(again.entries(after: nil, count: .max)).map { $0?.sequence } == [0, 1, 2, 3, 4])
    }
}
