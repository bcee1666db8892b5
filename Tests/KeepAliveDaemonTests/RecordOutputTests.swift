import Glibc
@testable import KeepAliveDaemon
import Testing

/// Whether a record write can wait for a reader decides where the daemon writes records: on the D-Bus
/// connection's thread (a regular file, no output) or from a task of their own (anything a reader drains).
@Suite("JSON Lines output: can a write block?")
struct JSONLinesSinkTests {
    @Test func aRegularFileAndNoOutputNeverBlock() throws {
        var template = Array("/tmp/keepalive-records-XXXXXX".utf8CString)
        let directory = try #require(mkdtemp(&template).map { String(cString: $0) })
        defer {
            unlink(directory + "/records.jsonl")
            rmdir(directory)
        }
        let file = try JSONLinesSink(output: .file(directory + "/records.jsonl"))
        #expect(file.neverBlocks)
        #expect(RecordSequencer(sinks: []).neverBlocks, "no output at all never blocks")
    }

    @Test func aPipeMayBlock() throws {
        var ends: [Int32] = [-1, -1]
        try #require(pipe(&ends) == 0)
        defer {
            close(ends[0])
            close(ends[1])
        }
        // The pipe's write end opened again by path, as `output:` would open a FIFO.
        let writer = try JSONLinesSink(output: .file("/proc/self/fd/\(ends[1])"))
        #expect(!writer.neverBlocks)
        #expect(!RecordSequencer(sinks: [writer]).neverBlocks)
    }
}

/// Every record's `ts` (and every log line's) is written byte by byte: the digits, their padding and the
/// separators must come out as RFC 3339 in UTC, milliseconds truncated, on both sides of the fast path's range.
@Suite("Record line: timestamps")
struct WallClockTimestampTests {
    @Test(arguments: [
        (0, 0, "1970-01-01T00:00:00.000Z"),
        (1_795_815_605, 123_999_999, "2026-11-27T21:40:05.123Z"),
        (951_782_400, 5_000_000, "2000-02-29T00:00:00.005Z"),
        (-1, 0, "1969-12-31T23:59:59.000Z"),
        (253_402_300_799, 999_999_999, "9999-12-31T23:59:59.999Z"),
        (253_402_300_800, 0, "10000-01-01T00:00:00.000Z"),
    ])
    func aTimeIsWrittenAsRFC3339InUTC(seconds: Int, nanoseconds: Int, expected: String) {
        #expect(WallClock.Time(seconds: seconds, nanoseconds: nanoseconds).rfc3339 == expected)
    }
}
