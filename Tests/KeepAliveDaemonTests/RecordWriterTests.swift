import Glibc
import KeepAliveDaemon
import Testing

/// Whether a record write can wait for a reader decides where the daemon writes records: on the D-Bus
/// connection's thread (a regular file, no output) or from a task of their own (anything a reader drains).
@Suite("Record writer: can a write block?")
struct RecordWriterTests {
    @Test func aRegularFileAndNoOutputNeverBlock() throws {
        var template = Array("/tmp/keepalive-records-XXXXXX".utf8CString)
        let directory = try #require(mkdtemp(&template).map { String(cString: $0) })
        defer {
            unlink(directory + "/records.jsonl")
            rmdir(directory)
        }
        let file = try RecordWriter(output: .file(directory + "/records.jsonl"))
        #expect(file.neverBlocks)
        #expect(try RecordWriter(output: .none).neverBlocks)
    }

    @Test func aPipeMayBlock() throws {
        var ends: [Int32] = [-1, -1]
        try #require(pipe(&ends) == 0)
        defer {
            close(ends[0])
            close(ends[1])
        }
        // The pipe's write end opened again by path, as `output:` would open a FIFO.
        let writer = try RecordWriter(output: .file("/proc/self/fd/\(ends[1])"))
        #expect(!writer.neverBlocks)
    }
}
