import LocalServices
import TestHarness
import Foundation
import Testing

@testable import MQTTBridge

#if canImport(Glibc)
    import Glibc
#endif

/// The spool when the disk fills mid-record: a write cut short must not shift the records after it. The limit is
/// the process's file size limit (`RLIMIT_FSIZE`: `write` stops at it, then fails with EFBIG, as it stops at a full
/// disk with ENOSPC), so this test binary is started again as a child that runs with it.
@Suite struct SpoolFullDiskTests {
    static let childVariable = "BRIDGE_SPOOL_FULL_CHILD"

    @Test func aRecordCutShortByAFullDiskCostsItselfOnlyAndTheRecordsAfterItReadBackWhole() async throws {
        let directory = try makeTemporaryDirectory(prefix: "bridge-full")
        defer { removeDirectory(directory) }
        let child = try childTestProcess(running: "appendsPastAFileSizeLimit", with: Self.childVariable, directory)
        defer { child.kill(SIGKILL) }
        try await waitUntil("the child is done", timeout: .seconds(60)) { child.exitStatus != nil }
        #expect(child.exitStatus == 0, "\(child.output.suffix(3_000))")
        let report = try #require(child.output.split(separator: "\n").first { $0.hasPrefix("FULL ") })
        // Records 0..<8 fit, record 8 was cut short and refused, 9..<12 were appended once there was room.
        #expect(
            report == "FULL refused=[8] pending=[0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11]", "\(child.output.suffix(3_000))")

        // Reopened, the spool holds the same records, and the refused one left nothing behind.
        let spool = try Spool(directory: directory, limit: 1 << 20, syncPolicy: .never)
        defer { spool.close() }
        #expect(
            try spool.read(spool.entries(after: nil, count: .max)).map { $0?.sequence } == [
                0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11,
            ])
        #expect(spool.corrupt == 0 && spool.damage.isEmpty)
    }

    /// The child: appends records under a file size limit that cuts the ninth short, then lifts the limit and
    /// appends three more; prints what was refused and what reads back.
    @Test(.enabled(if: ProcessInfo.processInfo.environment[SpoolFullDiskTests.childVariable] != nil))
    func appendsPastAFileSizeLimit() throws {
        let directory = try #require(ProcessInfo.processInfo.environment[Self.childVariable])
        signal(SIGXFSZ, SIG_IGN)  // a write past the limit fails with EFBIG instead of killing the process
        let record = { (sequence: UInt64) in
            SpoolRecord(sequence: sequence, succeeded: true, device: "kitchen", payload: recordPayload(sequence))
        }
        let size = record(0).encoded().count
        let spool = try Spool(directory: directory, limit: 1 << 20, syncPolicy: .never)
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit)
        let hard = limit.rlim_max
        limit.rlim_cur = rlim_t(8 * size + size / 2)
        #expect(setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit) == 0)
        var refused: [UInt64] = []
        for sequence in 0..<UInt64(9) {
            do { try spool.append(record(sequence)) } catch { refused.append(sequence) }
        }
        limit.rlim_cur = hard
        #expect(setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit) == 0)
        for sequence in 9..<UInt64(12) { try spool.append(record(sequence)) }
        let pending = try spool.read(spool.entries(after: nil, count: .max)).map { $0?.sequence ?? .max }
        print("FULL refused=\(refused) pending=\(pending)")
        spool.close()
    }
}
