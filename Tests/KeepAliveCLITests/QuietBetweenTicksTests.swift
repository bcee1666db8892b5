import LocalServices
import TestHarness
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Between two ticks the daemon sleeps: no thread of `keepalive run` wakes (Sources/QuietExecutor, and signals
/// through ProcessIO's pipe rather than libdispatch's sources). The same daemon on libdispatch's executors
/// (`KEEPALIVE_EXECUTOR=dispatch`) shows what this catches: libdispatch's workqueue monitor wakes every second.
@Suite("Quiet between ticks", .serialized)
struct QuietBetweenTicksTests {
    /// The second line of the built `keepalive --version`: `executors: quiet`, or `executors: stock (dispatch),
    /// reason: …` in a build without the executor SPI, or with KEEPALIVE_EXECUTOR=dispatch (.ci/stock-executors.sh).
    static let executors: String = {
        let output = (try? Subprocess.runBlocking([keepaliveBinary, "--version"]))?.standardOutput ?? ""
        return output.split(separator: "\n").first { $0.hasPrefix("executors: ") }.map(String.init) ?? output
    }()

    /// Context switches (voluntary and not) of each thread of `pid`, by thread id, with the threads' names.
    static func switches(of pid: pid_t) -> [Int: (name: String, count: Int)] {
        var result: [Int: (name: String, count: Int)] = [:]
        let directory = "/proc/\(pid)/task"
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return result }
        for thread in threads {
            guard let id = Int(thread),
                let status = try? String(contentsOfFile: "\(directory)/\(thread)/status", encoding: .utf8)
            else { continue }
            var name = "?"
            var count = 0
            for line in status.split(separator: "\n") {
                let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                guard parts.count == 2 else { continue }
                switch parts[0] {
                case "Name": name = parts[1]
                case "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches": count += Int(parts[1]) ?? 0
                default: break
                }
            }
            result[id] = (name, count)
        }
        return result
    }

    /// Runs `keepalive run` (2 devices every 4 s) and measures, after tick 1's records, 2 s of the quiet before
    /// tick 2: the wake-ups per thread in that span and the threads' names.
    static func quietSpan(environment: [String: String]) async throws -> (wakeups: [String: Int], threads: [String]) {
        try await CLITests.withSimulator(devices: 2) { bus, _ in
            let file = try TemporaryFile(
                name: "keepalive.yaml", contents: CLITests.configuration(devices: 2, interval: "4s"))
            defer { file.remove() }
            let process = try CommandProcess(
                ["run", "--config", file.path, "--bus", bus.address], environment: environment)
            defer { process.terminate() }
            try await waitUntil("tick 1's records", timeout: .seconds(30)) {
                process.standardOutput.components(separatedBy: "\"tick\":1,").count - 1 >= 2
            }
            // Tick 1's polls took a few hundred ms of its 4 s; the link's last signals from BlueZ come within
            // 100 ms of the disconnect. The span starts 0.5 s after the records and ends well before tick 2.
            let start = ContinuousClock.now + .milliseconds(500)
            try await waitUntil("the span starts", timeout: .seconds(5)) { ContinuousClock.now >= start }
            let before = switches(of: process.pid)
            try await waitUntil("the span ends", timeout: .seconds(5)) { ContinuousClock.now >= start + .seconds(2) }
            let after = switches(of: process.pid)
            #expect(
                process.standardOutput.components(separatedBy: "\"tick\":2,").count == 1, "tick 2 came inside the span")
            var wakeups: [String: Int] = [:]
            for (id, thread) in after {
                wakeups[thread.name, default: 0] += thread.count - (before[id]?.count ?? 0)
            }
            process.signal(SIGTERM)
            #expect(try await process.waitForExit(within: .seconds(10)) == 0)
            return (wakeups.filter { $0.value > 0 }, after.values.map(\.name).sorted())
        }
    }

    /// Skipped when the built `keepalive` says it runs on the stock executors, whose monitor wakes every second by
    /// design (the test below shows it); a binary that says nothing runs the test.
    @Test(
        .enabled(
            if: !executors.hasPrefix("executors: stock"),
            "keepalive --version says `executors: stock`: built without the quiet executors, it wakes between ticks"
        ))
    func noThreadWakesBetweenTicks() async throws {
        let (wakeups, threads) = try await Self.quietSpan(environment: [:])
        // No libdispatch worker or manager thread at all (theirs are named com.apple.root.… or …qos…).
        #expect(!threads.contains { $0.contains("qos") || $0.hasPrefix("com.apple") }, "threads: \(threads)")
        // The pool's workers (one that idled out comes back with the next number: under ThreadSanitizer on two slow
        // cores only ka-worker-2 and -3 were there), and the timerfd thread, where the pool's sleeps wait too.
        #expect(
            threads.contains { $0.hasPrefix("ka-worker-") } && threads.contains("timerfd"), "threads: \(threads)")
        #expect(threads.contains("signals"), "threads: \(threads)")
        // A sanitizer's runtime has a thread of its own that wakes on its schedule: counted only without one.
        if sanitizerSlowdown == 1 {
            #expect(wakeups.isEmpty, "wake-ups in 2 s between ticks: \(wakeups)")
        }
    }

    @Test func onLibdispatchsExecutorsTheMonitorWakesEverySecond() async throws {
        let (wakeups, threads) = try await Self.quietSpan(environment: ["KEEPALIVE_EXECUTOR": "dispatch"])
        #expect(threads.contains { $0.contains("qos") || $0.hasPrefix("com.apple") }, "threads: \(threads)")
        #expect(wakeups.values.reduce(0, +) >= 1, "wake-ups in 2 s between ticks: \(wakeups)")
    }
}
