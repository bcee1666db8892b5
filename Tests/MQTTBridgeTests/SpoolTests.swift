import LocalServices
import TestHarness
import Foundation
import Testing
@testable import MQTTBridge

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct SpoolTests {
    func record(_ sequence: UInt64) -> SpoolRecord {
        SpoolRecord(
            sequence: sequence, succeeded: sequence % 3 != 0, device: "kitchen", payload: recordPayload(sequence))
    }

    /// Every pending record, read back in order.
    func pendingSequences(_ spool: Spool) throws -> [UInt64] {
        try spool.entries(after: nil, count: .max).map { try #require(try spool.read($0)).sequence }
    }

    func segmentFiles(_ directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("segment-") }.sorted()
    }

    @Test func recordsRoundTripThroughTheirEncoding() throws {
        let original = SpoolRecord(sequence: 42, succeeded: true, device: "Küche/1", payload: [0, 1, 2, 255])
        let bytes = original.encoded()
        #expect(bytes.starts(with: SpoolRecord.marker))
        #expect(SpoolRecord.bodyLength(header: bytes[...]) == bytes.count - SpoolRecord.headerSize)
        #expect(SpoolRecord.decode(frame: bytes[...]) == original)
        var flipped = bytes
        flipped[bytes.count - 1] ^= 0x40
        #expect(SpoolRecord.decode(frame: flipped[...]) == nil)
        let padding = SpoolRecord.padding(size: 100)
        #expect(padding.count == 100)
        #expect(SpoolRecord.frame(at: padding[...])?.size == 100 && SpoolRecord.frame(at: padding[...])?.record == nil)
    }

    @Test func reopeningAfterACrashReplaysWhatWasNotAcknowledged() throws {
        let directory = try makeTemporaryDirectory(prefix: "spool-test")
        defer { removeDirectory(directory) }
        do {
            let spool = try Spool(directory: directory, limit: 1 << 20, syncPolicy: .everyRecord)
            for sequence in 0..<10 { try spool.append(record(UInt64(sequence))) }
            for entry in spool.entries(after: nil, count: 4) { try spool.acknowledge(entry.id) }
            // Dropped without close(): the descriptors close with the process in a real crash; nothing is flushed
            // by the spool on the way out, since it has no buffer.
        }
        let reopened = try Spool(directory: directory, limit: 1 << 20, syncPolicy: .everyRecord)
        #expect(try pendingSequences(reopened) == Array(4..<10))
        #expect(reopened.corrupt == 0)
        try reopened.append(record(10))
        #expect(try pendingSequences(reopened) == Array(4..<11))
    }

    @Test func aBatchIsReadAcrossSegmentsAndAcknowledgedWithOneMarkThatSurvivesACrash() throws {
        let directory = try makeTemporaryDirectory(prefix: "spool-test")
        defer { removeDirectory(directory) }
        do {
            // Segments of 512 bytes: a few records each, so a batch of 20 spans several.
            let spool = try Spool(directory: directory, limit: 4_096, syncPolicy: .never)
            for sequence in 0..<20 { try spool.append(record(UInt64(sequence))) }
            #expect(try segmentFiles(directory).count > 2)
            let batch = spool.entries(after: nil, count: 20)
            #expect(try spool.read(batch).map { $0?.sequence } == (0..<20).map { UInt64($0) })
            // Acknowledged through the 13th: the twelve before it with it, in one write; the older segments go.
            try spool.acknowledge(through: batch[batch.startIndex + 12].id)
            #expect(spool.pendingCount == 7 && spool.delivered == 13)
            #expect(try spool.read(spool.entries(after: nil, count: 3)).map { $0?.sequence } == [13, 14, 15])
            try spool.acknowledge(through: batch[batch.startIndex + 12].id)  // again: nothing left to do
            #expect(spool.delivered == 13)
        }
        let reopened = try Spool(directory: directory, limit: 4_096, syncPolicy: .never)
        #expect(try pendingSequences(reopened) == Array(13..<20))
    }

    @Test func aTornTailIsDetectedSkippedAndCutSoTheRestReplays() throws {
        let directory = try makeTemporaryDirectory(prefix: "spool-test")
        defer { removeDirectory(directory) }
        do {
            let spool = try Spool(directory: directory, limit: 1 << 20, syncPolicy: .never)
            for sequence in 0..<5 { try spool.append(record(UInt64(sequence))) }
        }
        let segment = directory + "/" + (try #require(try segmentFiles(directory).last))
        let size = try #require(try FileManager.default.attributesOfItem(atPath: segment)[.size] as? Int)
        // Cut into the last record's bytes, as a crash mid-write leaves it.
        #expect(truncate(segment, off_t(size - 7)) == 0)
        let reopened = try Spool(directory: directory, limit: 1 << 20, syncPolicy: .never)
        #expect(try pendingSequences(reopened) == [0, 1, 2, 3])
        #expect(reopened.corrupt == 1)
        // New records follow whole ones: the torn bytes were cut away.
        try reopened.append(record(5))
        let again = try Spool(directory: directory, limit: 1 << 20, syncPolicy: .never)
        #expect(try pendingSequences(again) == [0, 1, 2, 3, 5])
        #expect(again.corrupt == 0)
    }

    @Test func garbageAppendedAfterTheLastRecordIsNeverReplayed() throws {
        let directory = try makeTemporaryDirectory(prefix: "spool-test")
        defer { removeDirectory(directory) }
        do {
            let spool = try Spool(directory: directory, limit: 1 << 20, syncPolicy: .never)
            for sequence in 0..<3 { try spool.append(record(UInt64(sequence))) }
        }
        let segment = directory + "/" + (try #require(try segmentFiles(directory).last))
        let handle = try #require(FileHandle(forWritingAtPath: segment))
        handle.seekToEndOfFile()
        // A length that fits, with a wrong checksum; then zeros as after a power loss.
        handle.write(
            Data([40, 0, 0, 0, 1, 2, 3, 4] + [UInt8](repeating: 7, count: 40) + [UInt8](repeating: 0, count: 64)))
        handle.closeFile()
        let reopened = try Spool(directory: directory, limit: 1 << 20, syncPolicy: .never)
        #expect(try pendingSequences(reopened) == [0, 1, 2])
        #expect(reopened.corrupt == 1)
    }

    @Test func aFullSpoolDropsTheOldestRecordsCountsThemAndStaysWithinItsBound() throws {
        let directory = try makeTemporaryDirectory(prefix: "spool-test")
        defer { removeDirectory(directory) }
        let limit = 8_192
        var dropped: UInt64 = 0
        do {
            let spool = try Spool(directory: directory, limit: limit, syncPolicy: .never)
            for sequence in 0..<400 {
                dropped += try spool.append(record(UInt64(sequence)))
                #expect(spool.bytes <= limit)
            }
            #expect(dropped > 0)
            #expect(spool.dropped == dropped)
            let sequences = try pendingSequences(spool)
            #expect(UInt64(sequences.count) + dropped == 400)
            // What is left is the newest, contiguous, in order.
            #expect(sequences == Array(UInt64(400 - sequences.count)..<400))
        }
        let reopened = try Spool(directory: directory, limit: limit, syncPolicy: .never)
        #expect(reopened.dropped == dropped)
        #expect(UInt64(try pendingSequences(reopened).count) + dropped == 400)
    }

    @Test func acknowledgedSegmentsAreDeleted() throws {
        let directory = try makeTemporaryDirectory(prefix: "spool-test")
        defer { removeDirectory(directory) }
        let spool = try Spool(directory: directory, limit: 65_536, syncPolicy: .never)
        for sequence in 0..<300 { try spool.append(record(UInt64(sequence))) }
        #expect(try segmentFiles(directory).count > 2)
        for entry in spool.entries(after: nil, count: .max) { try spool.acknowledge(entry.id) }
        #expect(spool.pendingCount == 0)
        #expect(try segmentFiles(directory).count == 1)
        let reopened = try Spool(directory: directory, limit: 65_536, syncPolicy: .never)
        #expect(reopened.pendingCount == 0)
    }

    @Test func aRecordLargerThanASegmentIsRefusedNotTruncated() throws {
        let directory = try makeTemporaryDirectory(prefix: "spool-test")
        defer { removeDirectory(directory) }
        let spool = try Spool(directory: directory, limit: 4_096, syncPolicy: .never)
        #expect(throws: BridgeError.self) {
            try spool.append(
                SpoolRecord(sequence: 0, succeeded: true, device: "k", payload: [UInt8](repeating: 1, count: 2_000)))
        }
        #expect(spool.pendingCount == 0)
    }

    @Test func anAcknowledgedMarkPastWhatSurvivedAPowerLossMovesBackToTheEnd() throws {
        let directory = try makeTemporaryDirectory(prefix: "spool-test")
        defer { removeDirectory(directory) }
        do {
            let spool = try Spool(directory: directory, limit: 1 << 20, syncPolicy: .everyRecord)
            for sequence in 0..<3 {
                let (_, sync) = try spool.appendDeferringSync(record(UInt64(sequence)))
                try #require(sync).perform()
            }
            // Record 3 is published while its sync runs, and the broker acknowledges it.
            let (_, sync) = try spool.appendDeferringSync(record(3))
            for entry in spool.entries(after: nil, count: .max) { try spool.acknowledge(entry.id) }
            try #require(sync).perform()
        }
        // The power went before record 3 reached the disk: the acknowledged mark lies past the segment's end.
        let segment = directory + "/" + (try #require(try segmentFiles(directory).last))
        let size = try #require(try FileManager.default.attributesOfItem(atPath: segment)[.size] as? Int)
        #expect(truncate(segment, off_t(size - record(3).encoded().count)) == 0)
        do {
            let reopened = try Spool(directory: directory, limit: 1 << 20, syncPolicy: .everyRecord)
            #expect(reopened.pendingCount == 0)
            try reopened.append(record(4))
        }
        // Record 4 was written where record 3 had been, before the old mark: it must still replay.
        let again = try Spool(directory: directory, limit: 1 << 20, syncPolicy: .everyRecord)
        #expect(try pendingSequences(again) == [4])
    }
}
