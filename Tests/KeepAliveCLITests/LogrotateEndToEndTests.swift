import Foundation
import LocalServices
import TestHarness
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The JSON Lines output under logrotate, through the binary: SIGHUP reopens the file at its path, a file removed
/// without one is noticed at the next record, and SIGHUP never ends the daemon.
@Suite("logrotate and SIGHUP end to end", .serialized)
struct LogrotateEndToEndTests {
    static func text(_ path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }

    @Test func sighupAfterAMoveReopensTheFileAndARemovedFileIsRecreatedWithNoRecordLost() async throws {
        try await CLITests.withSimulator(devices: 2) { bus, _ in
            let file = try TemporaryFile(name: "keepalive.yaml", contents: CLITests.configuration(devices: 2))
            defer { file.remove() }
            let output = file.directory + "/records.jsonl"
            let process = try CommandProcess(
                ["run", "--config", file.path, "--bus", bus.address, "--output", output])
            defer { process.terminate() }
            try await waitUntil("records written", timeout: .seconds(20)) {
                CLITests.records(Self.text(output)).count >= 2
            }

            // logrotate: the file moved away, then SIGHUP.
            let rotated = output + ".1"
            #expect(rename(output, rotated) == 0)
            let mark = process.mark()
            process.signal(SIGHUP)
            try await waitUntil("the reopen logged", timeout: .seconds(10)) {
                process.standardError(since: mark).contains("SIGHUP: reopened the output file")
            }
            try await waitUntil("records in the new file", timeout: .seconds(20)) {
                CLITests.records(Self.text(output)).count >= 2
            }

            // Removed, with no SIGHUP: the next record makes a new file at the path.
            // Held open, the removed file can still be read at the end: records may reach it until the removal is
            // noticed.
            let removedMark = process.mark()
            let removed = open(output, O_RDONLY | O_CLOEXEC)
            #expect(removed >= 0)
            defer { close(removed) }
            #expect(unlink(output) == 0)
            try await waitUntil("a new file after the removal", timeout: .seconds(20)) {
                CLITests.records(Self.text(output)).count >= 1
            }
            // Logged after the record that noticed it is written, and read through a pipe: wait for the line.
            try await waitUntil("the removal logged", timeout: .seconds(10)) {
                process.standardError(since: removedMark).contains("the output file was moved or removed")
            }

            process.signal(SIGTERM)
            #expect(try await process.waitForExit(within: .seconds(10)) == 0, "\(process.standardError.suffix(3_000))")
            // Every record is in one of the three files, each once, in seq order: none lost at either switch.
            // readAll closes what it reads: a duplicate, so that `removed` is closed once, by its defer (a second
            // close would close whatever descriptor another test had been given that number meanwhile).
            let all = CLITests.records(Self.text(rotated) + Subprocess.readAll(dup(removed)) + Self.text(output))
            #expect(all.map(\.seq) == Array(0..<all.count), "\(all.map(\.seq))")
            #expect(!process.standardError.contains("cannot write"))
        }
    }

    @Test func sighupWithTheOutputOnStandardOutputIsLoggedAndTheDaemonGoesOn() async throws {
        try await CLITests.withSimulator(devices: 1) { bus, _ in
            let file = try TemporaryFile(name: "keepalive.yaml", contents: CLITests.configuration(devices: 1))
            defer { file.remove() }
            let process = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { process.terminate() }
            try await waitUntil("a record written", timeout: .seconds(20)) {
                !CLITests.records(process.standardOutput).isEmpty
            }
            let mark = process.mark()
            process.signal(SIGHUP)
            try await waitUntil("the SIGHUP logged", timeout: .seconds(10)) {
                process.standardError(since: mark).contains("SIGHUP: no output file to reopen")
            }
            let count = CLITests.records(process.standardOutput).count
            try await waitUntil("records go on after SIGHUP", timeout: .seconds(20)) {
                CLITests.records(process.standardOutput).count > count
            }
            #expect(process.exitStatus == nil)
            process.signal(SIGTERM)
            #expect(try await process.waitForExit(within: .seconds(10)) == 0)
        }
    }
}
