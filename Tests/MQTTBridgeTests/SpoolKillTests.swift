import LocalServices
import TestHarness
import Foundation
import Testing

@testable import MQTTBridge

#if canImport(Glibc)
    import Glibc
#endif

/// The spool against a real SIGKILL: this test binary is started again as a child that submits records until it
/// is killed, printing each sequence number once `submit` has returned; the parent kills it and reopens the spool.
@Suite struct SpoolKillTests {
    static let childVariable = "BRIDGE_SPOOL_KILL_CHILD"

    @Test func everyRecordSubmitReturnedForSurvivesSIGKILLOfTheProcess() async throws {
        let directory = try makeTemporaryDirectory(prefix: "bridge-kill")
        defer { removeDirectory(directory) }
        let child = try childTestProcess(running: "submitsUntilKilled", with: Self.childVariable, directory)
        defer { child.kill(SIGKILL) }
        @Sendable func printed() -> [UInt64] {
            child.output.split(separator: "\n").compactMap { line in
                line.hasPrefix("SPOOLED ") ? UInt64(line.dropFirst(8)) : nil
            }
        }
        try await waitUntil("the child has spooled 300 records", timeout: .seconds(60)) {
            printed().count >= 300 || child.exitStatus != nil
        }
        child.kill(SIGKILL)
        // Its output read to the end, not only its exit seen: a line still in the pipe would look unacknowledged.
        _ = try await child.waitForExit(within: .seconds(10))
        let acknowledged = printed()
        #expect(acknowledged.count >= 300, "the child ended early: \(child.output.suffix(2_000))")

        let spool = try Spool(directory: directory, limit: 256 << 20, syncPolicy: .never)
        let pending = try spool.entries(after: nil, count: .max).map { try #require(try spool.read($0)).sequence }
        // Every record the child was told is spooled is there, in order; at most the one being submitted at the
        // kill comes after them (whole, or cut away as a torn tail).
        #expect(Array(pending.prefix(acknowledged.count)) == acknowledged)
        #expect(pending.count <= acknowledged.count + 1)
        #expect(spool.corrupt <= 1)
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment[childVariable] != nil))
    func submitsUntilKilled() throws {
        let directory = try #require(ProcessInfo.processInfo.environment[Self.childVariable])
        // `.never`: write(2) only. A killed process loses nothing the kernel has; fdatasync is for power loss.
        let bridge = try MQTTBridge(
            configuration: bridgeConfiguration(
                port: 1, directory: directory, syncPolicy: .never, spoolLimit: 256 << 20),
            devices: [kitchen], logger: testLogger())
        for sequence in 0..<60_000 {
            try bridge.submit(
                device: "kitchen", sequence: UInt64(sequence), succeeded: true, payload: recordPayload(UInt64(sequence))
            )
            // One write(2) per line: unbuffered, and whole in the pipe (shorter than PIPE_BUF).
            let line = Array("SPOOLED \(sequence)\n".utf8)
            _ = line.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
            usleep(1_000)
        }
    }
}
