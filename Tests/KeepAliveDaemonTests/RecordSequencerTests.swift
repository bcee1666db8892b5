import KeepAlive
import Polling
import KeepAliveDaemon
import Basics
import Testing

/// The one place records are numbered: every sink sees every record once, in `seq` order and in the sinks'
/// order, with one line made for all; a sink that fails stops the output for good.
@Suite("Record sequencer")
struct RecordSequencerTests {
    /// Remembers what it was given, in a log shared with the other sinks of the test.
    final class LoggingSink: RecordSink {
        let name: String
        let log: Locked<[(sink: String, sequence: UInt64, line: String)]>
        let failAt: UInt64?
        let neverBlocks = true

        init(_ name: String, log: Locked<[(sink: String, sequence: UInt64, line: String)]>, failAt: UInt64? = nil) {
            self.name = name
            self.log = log
            self.failAt = failAt
        }

        func accept(_ record: SequencedRecord) throws(OutputError) {
            if record.sequence == failAt { throw OutputError(path: name, errno: 28, operation: "write to") }
            log.withLock { $0.append((name, record.sequence, record.line)) }
        }
    }

    /// A sink that reads no line (as the metrics' textfile).
    final class CountingSink: RecordSink {
        let count = Locked<(records: Int, lines: [String])>((0, []))
        let neverBlocks = true
        let needsLine = false

        func accept(_ record: SequencedRecord) throws(OutputError) {
            count.withLock {
                $0.records += 1
                $0.lines.append(record.line)
            }
        }
    }

    /// With no sink that reads it, no line is made; the records are numbered and handed over all the same.
    @Test func noLineIsMadeWhenNoSinkReadsIt() {
        let counting = CountingSink()
        let sequencer = RecordSequencer(sinks: [counting])
        for _ in 0..<3 { sequencer.submit(Self.record("device")) }
        #expect(sequencer.written == 3)
        #expect(counting.count.withLock { $0.records } == 3)
        #expect(counting.count.withLock { $0.lines } == ["", "", ""])
        let log = Locked<[(sink: String, sequence: UInt64, line: String)]>([])
        let both = RecordSequencer(sinks: [counting, LoggingSink("output", log: log)])
        both.submit(Self.record("device"))
        #expect(log.withLock { $0.first?.line.contains("\"device\":\"device\"") } == true, "a sink reads lines")
    }

    static func record(_ device: String) -> PollRecord {
        PollRecord(
            device: device, peripheral: Peripheral(address: "AA:BB:CC:00:00:01", adapter: "hci0"), tick: 0,
            scheduled: KeepAliveInstant(offset: .zero), fired: KeepAliveInstant(offset: .zero), result: .noData,
            interval: .seconds(30)
        )
    }

    @Test func everySinkSeesEveryRecordOnceInSeqOrderSpoolFirstWithOneLine() async {
        let log = Locked<[(sink: String, sequence: UInt64, line: String)]>([])
        let sequencer = RecordSequencer(sinks: [LoggingSink("spool", log: log), LoggingSink("output", log: log)])
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for _ in 0..<100 { sequencer.submit(Self.record("device-\(task)")) }
                }
            }
        }
        let entries = log.withLock { $0 }
        #expect(sequencer.written == 800)
        #expect(entries.count == 1_600)
        // Pairs, in seq order: the spool's entry, then the output's, with the same line.
        for (index, pair) in stride(from: 0, to: entries.count, by: 2).map({ (entries[$0], entries[$0 + 1]) })
            .enumerated()
        {
            #expect(pair.0.sink == "spool" && pair.1.sink == "output")
            #expect(pair.0.sequence == UInt64(index) && pair.1.sequence == UInt64(index))
            #expect(pair.0.line == pair.1.line)
            #expect(pair.0.line.contains("\"seq\":\(index),"))
        }
    }

    @Test func aFailingSinkStopsEveryLaterRecordEverywhereAndIsReportedOnce() {
        let log = Locked<[(sink: String, sequence: UInt64, line: String)]>([])
        let failures = Locked<[OutputError]>([])
        let sequencer = RecordSequencer(
            sinks: [LoggingSink("spool", log: log), LoggingSink("output", log: log, failAt: 2)],
            onFailure: { error in failures.withLock { $0.append(error) } }
        )
        for index in 0..<5 { sequencer.submit(Self.record("device-\(index)")) }
        #expect(failures.withLock { $0.count } == 1)
        #expect(sequencer.failure?.path == "output")
        #expect(sequencer.written == 2, "the failed record's seq is never given again")
        let entries = log.withLock { $0 }
        #expect(entries.map(\.sink) == ["spool", "output", "spool", "output", "spool"])
        #expect(entries.map(\.sequence) == [0, 0, 1, 1, 2])
    }

    @Test func withNoSinkRecordsAreNumberedAndNothingElse() {
        let sequencer = RecordSequencer(sinks: [])
        for index in 0..<3 { sequencer.submit(Self.record("device-\(index)")) }
        #expect(sequencer.written == 3)
        #expect(sequencer.neverBlocks)
    }
}
