import Foundation
import LocalServices
import TestHarness
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A disk that fills up under a running daemon, through the binary and a real mosquitto: the spool's disk (records
/// lost are counted on `dropped` and said in `health`; when space returns every record written afterwards and
/// every intact one on disk is delivered) and the output's disk (MQTT goes on; no partial line is left). A small
/// tmpfs is the disk: mounting one needs root (CI runs as root); otherwise the tests say so and pass.
@Suite("a full disk end to end", .serialized)
struct FullDiskEndToEndTests {
    /// A 1 MiB tmpfs at a new directory, unmounted by `body`'s end.
    static func withSmallDisk(_ body: (String) async throws -> Void) async throws {
        guard getuid() == 0 else {
            print("a full disk end to end: skipped, mounting a tmpfs needs root")
            return
        }
        let directory = try makeTemporaryDirectory(prefix: "keepalive-full-disk")
        defer { _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", directory]) }
        let mounted = try Subprocess.runBlocking(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", directory])
        try #require(mounted.status == 0, "mount: \(mounted.standardError)")
        defer { _ = Subprocess.runBlockingIgnoringErrors(["umount", "-l", directory]) }
        try await body(directory)
    }

    /// Fills the file system of `directory` with a file, to the last byte it takes; returns the file.
    static func fill(_ directory: String) throws -> String {
        let path = directory + "/filler"
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        let chunk = [UInt8](repeating: 0xAA, count: 4_096)
        while chunk.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) > 0 {}
        #expect(errno == ENOSPC)
        return path
    }

    /// Whether the log has `lost=count` as a whole value.
    static func logs(_ log: String, lost count: Int) -> Bool {
        log.contains("lost=\(count) ") || log.contains("lost=\(count)\n")
    }

    /// The sequence numbers each `<sink> writes again` line says were lost (its `seq=first-last`, or `seq=n`), and
    /// whether every such line's `lost=` matches its range.
    static func lostRanges(_ log: String) -> (sequences: [Int], consistent: Bool) {
        var sequences: [Int] = []
        var consistent = true
        for line in log.split(separator: "\n") where line.contains("writes again") {
            func value(_ key: String) -> Substring? {
                line.split(separator: " ").first { $0.hasPrefix(key + "=") }?.dropFirst(key.count + 1)
            }
            let bounds = (value("seq") ?? "").split(separator: "-").compactMap { Int($0) }
            guard let first = bounds.first, let lost = value("lost").flatMap({ Int($0) }) else {
                consistent = false
                continue
            }
            let range = Array(first...(bounds.last ?? first))
            consistent = consistent && range.count == lost
            sequences += range
        }
        return (sequences, consistent)
    }

    static func delivered(_ subscriber: MQTTBridgeEndToEndTests.Subscriber) -> Set<Int> {
        Set(subscriber.stateSequences(prefix: "keepalive/gw/"))
    }

    @Test func aFullSpoolDiskCountsItsLossesAndDeliversEverythingWrittenOnceThereIsRoom() async throws {
        try await Self.withSmallDisk { disk in
            try await MQTTBridgeEndToEndTests.withSetup { bus, broker, _ in
                try await MQTTBridgeEndToEndTests.withDaemon(bus: bus, port: broker.port, spool: disk + "/spool") {
                    process, subscriber in
                    try await waitUntil("records delivered", timeout: .seconds(20)) {
                        Self.delivered(subscriber).count >= 4
                    }

                    let mark = process.mark()
                    let filler = try Self.fill(disk)
                    try await waitUntil("the spool's trouble logged", timeout: .seconds(30)) {
                        process.standardError(since: mark).contains("the MQTT spool cannot write")
                    }
                    try await waitUntil("health says so", timeout: .seconds(10)) {
                        subscriber.last("keepalive/gw/health")?.contains("the MQTT spool cannot write") == true
                    }
                    try await waitUntil("three records lost and counted", timeout: .seconds(20)) {
                        (Int(subscriber.last("keepalive/gw/dropped") ?? "") ?? 0) >= 3
                    }
                    // A line for the trouble, not one per record (three are lost by now).
                    let troubles =
                        process.standardError(since: mark).components(separatedBy: " cannot write:").count - 1
                    #expect(troubles <= 2, "\(process.standardError(since: mark).suffix(2_000))")

                    let recovered = process.mark()
                    #expect(unlink(filler) == 0)
                    try await waitUntil("the recovery logged", timeout: .seconds(30)) {
                        process.standardError(since: recovered).contains("the MQTT spool writes again")
                    }
                    try await waitUntil("health well again", timeout: .seconds(10)) {
                        subscriber.last("keepalive/gw/health")?.hasPrefix("polling") == true
                    }
                    let written = CLITests.records(process.standardOutput).map(\.seq)
                    try await waitUntil("every record written since delivered", timeout: .seconds(30)) {
                        let delivered = Self.delivered(subscriber)
                        let dropped = Int(subscriber.last("keepalive/gw/dropped") ?? "") ?? 0
                        return written.filter { !delivered.contains($0) }.count <= dropped
                    }
                    process.signal(SIGTERM)
                    #expect(try await process.waitForExit(within: .seconds(15)) == 0)
                    await subscriber.close()

                    // Exactly the records counted as dropped are missing, and the log said how many.
                    let delivered = Self.delivered(subscriber)
                    let missing = written.filter { !delivered.contains($0) }
                    let dropped = Int(subscriber.last("keepalive/gw/dropped") ?? "") ?? -1
                    #expect(missing.count == dropped, "missing \(missing), dropped \(dropped)")
                    // Lost while the disk was full: the log says which, in one line per time the spool could not
                    // write. Usually that is once; but the spool frees blocks as it deletes what the broker has
                    // acknowledged, so a slow machine (ThreadSanitizer) can see one record fit between two losses.
                    let log = process.standardError(since: mark)
                    let said = Self.lostRanges(log)
                    #expect(
                        said.consistent && said.sequences == missing, "missing \(missing), log \(log.suffix(2_000))")
                    #expect(
                        log.components(separatedBy: " cannot write:").count
                            == log.components(separatedBy: "writes again").count,
                        "each time it could not write ends once: \(log.suffix(2_000))")
                    print("a full spool disk: \(written.count) records, \(dropped) lost while full, the rest delivered")
                }
            }
        }
    }

    @Test func aFullOutputDiskLosesOnlyItsLinesWhileMQTTGoesOnAndLeavesNoPartialLine() async throws {
        try await Self.withSmallDisk { disk in
            let output = disk + "/records.jsonl"
            try await MQTTBridgeEndToEndTests.withSetup { bus, broker, spool in
                try await MQTTBridgeEndToEndTests.withDaemon(
                    bus: bus, port: broker.port, spool: spool, arguments: ["--output", output]
                ) { process, subscriber in
                    try await waitUntil("records written", timeout: .seconds(20)) {
                        CLITests.records(LogrotateEndToEndTests.text(output)).count >= 2
                    }

                    let mark = process.mark()
                    let filler = try Self.fill(disk)
                    try await waitUntil("the output's trouble logged", timeout: .seconds(30)) {
                        process.standardError(since: mark).contains("the output file cannot write")
                    }
                    let full = Self.delivered(subscriber).max() ?? 0
                    try await waitUntil("MQTT goes on", timeout: .seconds(20)) {
                        (Self.delivered(subscriber).max() ?? 0) >= full + 3
                    }
                    try await waitUntil("health says so", timeout: .seconds(10)) {
                        subscriber.last("keepalive/gw/health")?.contains("the output file cannot write") == true
                    }

                    let recovered = process.mark()
                    #expect(unlink(filler) == 0)
                    try await waitUntil("the recovery logged", timeout: .seconds(30)) {
                        process.standardError(since: recovered).contains("the output file writes again")
                    }
                    let after = Self.delivered(subscriber).max() ?? 0
                    try await waitUntil("lines again", timeout: .seconds(20)) {
                        (CLITests.records(LogrotateEndToEndTests.text(output)).last?.seq ?? 0) > after
                    }
                    process.signal(SIGTERM)
                    #expect(try await process.waitForExit(within: .seconds(15)) == 0)
                    await subscriber.close()

                    // Every line whole JSON; the lines missing are exactly the ones the log counted; MQTT has them all.
                    let text = LogrotateEndToEndTests.text(output)
                    #expect(text.hasSuffix("\n"))
                    for line in text.split(separator: "\n") {
                        #expect(
                            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "a partial line: \(line)"
                        )
                    }
                    let lines = CLITests.records(text).map(\.seq)
                    let last = try #require(lines.last)
                    let missing = Array(0...last).filter { !lines.contains($0) }
                    #expect(!missing.isEmpty)
                    #expect(
                        Self.logs(process.standardError, lost: missing.count), "\(process.standardError.suffix(2_000))")
                    let delivered = Self.delivered(subscriber)
                    #expect(missing.allSatisfy(delivered.contains), "missing from MQTT too: \(missing)")
                    print("a full output disk: \(missing.count) lines lost while full, all delivered over MQTT")
                }
            }
        }
    }
}
