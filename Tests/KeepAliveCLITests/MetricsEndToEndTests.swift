import LocalServices
import TestHarness
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `metrics:` end to end: the built `keepalive run` against the simulator, its textfile and its endpoint read by
/// the real tools (Debian's `promtool check metrics`, `curl`), and its counters held against its records.
@Suite("Metrics end to end", .serialized)
struct MetricsEndToEndTests {
    /// Debian's promtool: on the PATH, or where `make deps` unpacks it (.build-tools/prometheus, without installing
    /// the prometheus package and its service). Missing, the tests fail: `make deps` brings it.
    static let promtool: String? = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        let candidates =
            (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/promtool" }
            + [root + "/.build-tools/prometheus/usr/bin/promtool"]
        return candidates.first { access($0, X_OK) == 0 }
    }()

    /// `promtool check metrics` on `text`: its exit status (3: lint problems) and what it said.
    static func promtoolCheck(_ text: String) async throws -> (status: Int32, output: String) {
        let promtool = try #require(promtool, "promtool is missing: `make deps` unpacks it into .build-tools/")
        let file = try TemporaryFile(name: "metrics.prom", contents: text)
        defer { file.remove() }
        // promtool reads the metrics on its standard input.
        let result = try await Subprocess.run(["sh", "-c", "'\(promtool)' check metrics < '\(file.path)' 2>&1"])
        return (result.status, result.standardOutput)
    }

    /// The metric families of `text` as the Prometheus Python client's OpenMetrics parser reads them (Debian's
    /// python3-prometheus-client, which `make deps` installs; promtool reads Prometheus text 0.0.4 only): the
    /// parser's exit status and what it printed (the families' count, or its error).
    static func openMetricsParse(_ text: String) async throws -> (status: Int32, output: String) {
        let file = try TemporaryFile(name: "metrics.txt", contents: text)
        defer { file.remove() }
        // /usr/bin/python3: Debian's, whose dist-packages has the client (a python3 first on the PATH may not).
        let script = """
            import sys
            from prometheus_client.openmetrics.parser import text_string_to_metric_families
            families = list(text_string_to_metric_families(open(sys.argv[1]).read()))
            print(len(families), sum(len(f.samples) for f in families))
            """
        let result = try await Subprocess.run(["/usr/bin/python3", "-c", script, file.path])
        return (result.status, result.standardOutput + result.standardError)
    }

    /// `keepalive_polls_total` by `device|result|code` from Prometheus text.
    static func polls(in text: String) -> [String: Int] {
        var counts: [String: Int] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("keepalive_polls_total{") {
            guard let open = line.firstIndex(of: "{"), let close = line.lastIndex(of: "}"),
                let value = Int(line[line.index(after: close)...].dropFirst())
            else { continue }
            let labels = line[line.index(after: open)..<close]
            var fields: [String: String] = [:]
            for pair in labels.split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                fields[String(parts[0])] = String(parts[1].dropFirst().dropLast())
            }
            guard value > 0 else { continue }
            counts["\(fields["device"] ?? "")|\(fields["result"] ?? "")|\(fields["code"] ?? "")"] = value
        }
        return counts
    }

    /// The same from JSON Lines records.
    static func polls(inRecords output: String) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for line in output.split(separator: "\n") {
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not a record: \(line)")
            let device = object["device"] as? String ?? ""
            let result = object["result"] as? String ?? ""
            let code = (object["error"] as? [String: Any])?["code"] as? String ?? ""
            counts["\(device)|\(result)|\(code)", default: 0] += 1
        }
        return counts
    }

    /// The sample `name` (labels included, as written) from Prometheus text.
    static func value(of name: String, in text: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap {
            $0.split(separator: " ").last.flatMap { Double($0) }
        }
    }

    /// Three ticks of three devices, one of them failing (absent), then the run's end: the last textfile counts
    /// exactly the records the run wrote, by device, result and failure code, and promtool finds nothing wrong.
    @Test func theLastTextfileCountsEveryRecordAndPassesPromtool() async throws {
        try await CLITests.withSimulator(devices: 3) { bus, simulator in
            let directory = try makeTemporaryDirectory(prefix: "keepalive-metrics")
            defer { removeTree(directory) }
            // A fourth device the simulator does not have: its polls fail with a code of their own. At 3 s (a window
            // of 2 s): at 1 s a CI run on the stock executors under the whole suite's load had every window of the
            // three present devices time out, and no success to time the phases of.
            let configuration =
                CLITests.configuration(
                    devices: 3, interval: "3s", extra: "metrics:\n  textfile: \(directory)/keepalive.prom\n")
                + "  - name: \"absent \\\"one\\\"\"\n    address: C0:FF:EE:00:00:09\n    read: [2a19]\n"
            let file = try TemporaryFile(name: "keepalive.yaml", contents: configuration)
            defer { file.remove() }
            let (status, stdout, stderr) = try await CommandProcess.run(
                ["run", "--config", file.path, "--bus", bus.address, "--ticks", "3"], within: .seconds(90))
            #expect(status == 0, "\(stderr)")
            let text = try String(contentsOfFile: "\(directory)/keepalive.prom", encoding: .utf8)
            let records = try Self.polls(inRecords: stdout)
            #expect(records.values.reduce(0, +) == 12, "\(records)")
            #expect(
                records.keys.contains {
                    $0.hasPrefix("absent \\\"one\\\"|failed|") || $0.hasPrefix("absent \"one\"|failed|")
                })
            #expect(
                Self.polls(in: text).count == records.count, "textfile: \(Self.polls(in: text)) records: \(records)")
            // The textfile escapes the quotes of the device's name: compare with them unescaped.
            let unescaped = Dictionary(
                uniqueKeysWithValues: Self.polls(in: text).map {
                    ($0.key.replacingOccurrences(of: "\\\"", with: "\""), $0.value)
                })
            #expect(unescaped == records, "textfile: \(unescaped)\nrecords: \(records)")
            // Every phase of a successful poll was timed (at least once each: a retried attempt adds its own).
            let succeeded = records.filter { !$0.key.contains("|failed|") }.values.reduce(0, +)
            #expect(succeeded >= 1)
            for phase in ["connect", "service_resolution", "read", "disconnect"] {
                let count = Self.value(
                    of: "keepalive_poll_phase_seconds_count{adapter=\"hci0\",phase=\"\(phase)\"}", in: text)
                #expect((count ?? 0) >= Double(succeeded), "\(phase): \(String(describing: count))")
            }
            // Every record of the absent device failed; those that found no free slot (the others' doing, under
            // load) leave the count as it is.
            let inARow = records.filter { $0.key.hasPrefix("absent \"one\"|failed|") && !$0.key.hasSuffix("|noSlot") }
                .values.reduce(0, +)
            #expect(inARow >= 1)
            #expect(
                Self.value(of: #"keepalive_failures_in_a_row{device="absent \"one\""}"#, in: text) == Double(inARow),
                "\(text)")
            #expect(Self.value(of: #"keepalive_adapter_healthy{adapter="hci0"}"#, in: text) == 1, "\(text)")
            #expect(text.contains("keepalive_build_info{version="))
            #expect(access("\(directory)/keepalive.prom.tmp", F_OK) != 0, "the temporary file was left behind")
            let check = try await Self.promtoolCheck(text)
            #expect(check.status == 0 && check.output.isEmpty, "promtool: \(check.output)\n\(text)")
            try await CLITests.expectAllDisconnected(simulator)
        }
    }

    /// The endpoint on a port the kernel picks, scraped with curl while the daemon polls: Prometheus 0.0.4 that
    /// promtool passes, OpenMetrics when asked for, 404 and 405 elsewhere; between ticks its idle loop wakes
    /// nothing.
    @Test func theEndpointIsScrapedByCurlWhileTheDaemonPolls() async throws {
        try await CLITests.withSimulator(devices: 2) { bus, _ in
            let file = try TemporaryFile(
                name: "keepalive.yaml",
                contents: CLITests.configuration(
                    devices: 2, interval: "5s", extra: "metrics:\n  listen: 127.0.0.1:0\n"))
            defer { file.remove() }
            let process = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { process.terminate() }
            try await waitUntil("the endpoint's address in the log", timeout: .seconds(30)) {
                process.standardError.contains("metrics: serving GET /metrics listen=127.0.0.1:")
            }
            let log = process.standardError
            let address = try #require(
                log.components(separatedBy: "listen=").dropFirst().first?.split(separator: "\n").first.map(String.init))
            let url = "http://\(address)/metrics"
            try await waitUntil("tick 1's records", timeout: .seconds(30)) {
                process.standardOutput.components(separatedBy: "\"tick\":1,").count - 1 >= 2
            }
            // Between ticks, with nobody scraping, no thread wakes: the event loop waits without a timeout.
            if !QuietBetweenTicksTests.executors.hasPrefix("executors: stock"), sanitizerSlowdown == 1 {
                let start = ContinuousClock.now + .milliseconds(500)
                try await waitUntil("the span starts", timeout: .seconds(5)) { ContinuousClock.now >= start }
                let before = QuietBetweenTicksTests.switches(of: process.pid)
                try await waitUntil("the span ends", timeout: .seconds(5)) {
                    ContinuousClock.now >= start + .seconds(2)
                }
                let after = QuietBetweenTicksTests.switches(of: process.pid)
                var wakeups: [String: Int] = [:]
                for (id, thread) in after {
                    wakeups[thread.name, default: 0] += thread.count - (before[id]?.count ?? 0)
                }
                #expect(
                    process.standardOutput.components(separatedBy: "\"tick\":2,").count == 1, "tick 2 came in the span")
                #expect(wakeups.filter { $0.value > 0 }.isEmpty, "wake-ups in 2 s between ticks: \(wakeups)")
            }
            let scraped = try await Subprocess.run(["curl", "-sS", "--max-time", "10", "-D", "-", url])
            #expect(scraped.status == 0, "\(scraped.standardError)")
            let (headers, body) = Self.split(scraped.standardOutput)
            #expect(headers.contains("HTTP/1.1 200"), "\(headers)")
            #expect(headers.lowercased().contains("content-type: text/plain; version=0.0.4"), "\(headers)")
            #expect(Self.polls(in: body).values.reduce(0, +) >= 2, "\(body)")
            let check = try await Self.promtoolCheck(body)
            #expect(check.status == 0 && check.output.isEmpty, "promtool: \(check.output)\n\(body)")

            let open = try await Subprocess.run([
                "curl", "-sS", "--max-time", "10", "-D", "-", "-H",
                "Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5", url,
            ])
            let (openHeaders, openBody) = Self.split(open.standardOutput)
            #expect(openHeaders.lowercased().contains("content-type: application/openmetrics-text"), "\(openHeaders)")
            #expect(openBody.hasSuffix("# EOF\n") && openBody.contains("# TYPE keepalive_polls counter"), "\(openBody)")
            let parsed = try await Self.openMetricsParse(openBody)
            #expect(parsed.status == 0, "the OpenMetrics parser: \(parsed.output)\n\(openBody)")

            let elsewhere = try await Subprocess.run([
                "curl", "-s", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}", "http://\(address)/",
            ])
            #expect(elsewhere.standardOutput == "404")
            let posted = try await Subprocess.run([
                "curl", "-s", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-d", "x", url,
            ])
            #expect(posted.standardOutput == "405")

            process.signal(SIGTERM)
            #expect(try await process.waitForExit(within: .seconds(15)) == 0, "\(process.standardError)")
            // Closed with the daemon: nothing listens there any more.
            let after = try await Subprocess.run(["curl", "-s", "--max-time", "5", url])
            #expect(after.status != 0)
        }
    }

    /// With the MQTT bridge: once a --ticks run has drained its spool, every record was delivered, each delivery
    /// timed, and nothing waits; the adapter's health and the bridge's connection are there too.
    @Test func theBridgesDeliveriesAreCountedAndTimed() async throws {
        try await MQTTBridgeEndToEndTests.withSetup { bus, broker, spool in
            let directory = try makeTemporaryDirectory(prefix: "keepalive-metrics")
            defer { removeTree(directory) }
            let file = try TemporaryFile(
                name: "keepalive.yaml",
                contents: MQTTBridgeEndToEndTests.configuration(
                    port: broker.port, spool: spool, interval: "1s",
                    extra: "metrics:\n  textfile: \(directory)/keepalive.prom"))
            defer { file.remove() }
            let (status, stdout, stderr) = try await CommandProcess.run(
                ["run", "--config", file.path, "--bus", bus.address, "--ticks", "3"], within: .seconds(90))
            #expect(status == 0, "\(stderr)")
            let records = stdout.split(separator: "\n").count
            #expect(records == 6)
            let text = try String(contentsOfFile: "\(directory)/keepalive.prom", encoding: .utf8)
            #expect(Self.value(of: "keepalive_mqtt_delivered_total", in: text) == Double(records), "\(text)")
            #expect(Self.value(of: "keepalive_mqtt_delivery_seconds_count", in: text) == Double(records), "\(text)")
            #expect(Self.value(of: "keepalive_mqtt_dropped_total", in: text) == 0, "\(text)")
            #expect(Self.value(of: "keepalive_spool_records", in: text) == 0, "\(text)")
            #expect(Self.value(of: "keepalive_spool_oldest_age_seconds", in: text) == 0, "\(text)")
            #expect(Self.value(of: "keepalive_spool_bytes", in: text) != nil, "\(text)")
            let check = try await Self.promtoolCheck(text)
            #expect(check.status == 0 && check.output.isEmpty, "promtool: \(check.output)\n\(text)")
        }
    }

    /// A lone fleet gateway claims its shared device: held, one hold by claim; released when it stops.
    @Test func aFleetGatewaysHoldsAreCounted() async throws {
        try await MQTTBridgeEndToEndTests.withSetup { bus, broker, spool in
            let directory = try makeTemporaryDirectory(prefix: "keepalive-metrics")
            defer { removeTree(directory) }
            let path = "\(directory)/keepalive.prom"
            let file = try TemporaryFile(
                name: "keepalive.yaml",
                contents: """
                    interval: 1s
                    min_interval: 1s
                    devices:
                      - {name: shared-1, address: C0:FF:EE:00:00:01, read: [2a19], shared: true}
                    mqtt:
                      broker: mqtt://127.0.0.1:\(broker.port)
                      gateway: gw
                      spool: {path: \(spool)}
                    fleet:
                      lease: 6s
                      scan: {every: 4s, for: 1s}
                    metrics:
                      textfile: \(path)

                    """)
            defer { file.remove() }
            let process = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { process.terminate() }
            @Sendable func sample(_ name: String) -> Double? {
                (try? String(contentsOfFile: path, encoding: .utf8)).flatMap { Self.value(of: name, in: $0) }
            }
            try await waitUntil("the shared device held and polled", timeout: .seconds(60)) {
                sample("keepalive_fleet_held_devices") == 1
                    && sample(#"keepalive_fleet_holds_total{how="claimed"}"#) == 1
                    && (sample(#"keepalive_polls_total{device="shared-1",result="newData"}"#) ?? 0) >= 1
            }
            process.signal(SIGTERM)
            #expect(try await process.waitForExit(within: .seconds(20)) == 0, "\(process.standardError)")
            #expect(sample("keepalive_fleet_held_devices") == 0)
            #expect(sample(#"keepalive_fleet_releases_total{why="released"}"#) == 1)
            let check = try await Self.promtoolCheck(try String(contentsOfFile: path, encoding: .utf8))
            #expect(check.status == 0 && check.output.isEmpty, "promtool: \(check.output)")
        }
    }

    /// Without `metrics:` nothing of it is made: no endpoint thread, no file.
    @Test func withoutMetricsNoThreadIsStarted() async throws {
        try await CLITests.withSimulator(devices: 1) { bus, _ in
            let file = try TemporaryFile(
                name: "keepalive.yaml", contents: CLITests.configuration(devices: 1, interval: "5s"))
            defer { file.remove() }
            let process = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { process.terminate() }
            try await waitUntil("tick 1's record", timeout: .seconds(30)) {
                process.standardOutput.contains("\"tick\":1,")
            }
            let threads = QuietBetweenTicksTests.switches(of: process.pid).values.map(\.name)
            #expect(!threads.contains { $0.hasPrefix("NIO-") }, "threads: \(threads)")
            #expect(!process.standardError.contains("metrics:"))
            process.signal(SIGTERM)
            #expect(try await process.waitForExit(within: .seconds(15)) == 0)
        }
    }

    /// A port already taken stops the start, naming the setting.
    @Test func aTakenPortStopsTheStart() async throws {
        try await CLITests.withSimulator(devices: 1) { bus, _ in
            let listener = try SilentListener()
            defer { listener.close() }
            let file = try TemporaryFile(
                name: "keepalive.yaml",
                contents: CLITests.configuration(
                    devices: 1, interval: "5s", extra: "metrics:\n  listen: 127.0.0.1:\(listener.port)\n"))
            defer { file.remove() }
            let (status, _, stderr) = try await CommandProcess.run(
                ["run", "--config", file.path, "--bus", bus.address], within: .seconds(30))
            #expect(status != 0)
            #expect(stderr.contains("metrics.listen 127.0.0.1:\(listener.port)"), "\(stderr)")
        }
    }

    /// Headers and body of `curl -D -`'s output.
    static func split(_ output: String) -> (headers: String, body: String) {
        guard let end = output.range(of: "\r\n\r\n") else { return (output, "") }
        return (String(output[..<end.lowerBound]), String(output[end.upperBound...]))
    }
}

/// The healing ladder's steps and the adapter's health in the textfile, beside the other healing tests (one at a
/// time: they share their wall-clock bounds).
extension MonthsWithoutAPersonTests.HealingEndToEndTests {
    @Test func anAdapterReportedUnhealthyReadsZeroInTheMetricsUntilItIsBack() async throws {
        let directory = try makeTemporaryDirectory(prefix: "keepalive-metrics")
        defer { removeTree(directory) }
        let path = "\(directory)/keepalive.prom"
        @Sendable func sample(_ name: String) -> Double? {
            (try? String(contentsOfFile: path, encoding: .utf8)).flatMap {
                MetricsEndToEndTests.value(of: name, in: $0)
            }
        }
        let healthy = #"keepalive_adapter_healthy{adapter="hci0"}"#
        try await Self.withDaemon(extra: "healing:\n  failing_rounds: 2\nmetrics:\n  textfile: \(path)\n") {
            simulator, _, _ in
            try await simulator.setPowered(false)
            try await waitUntil("the textfile says hci0 is unhealthy", timeout: .seconds(30)) {
                sample(healthy) == 0
                    && (sample(#"keepalive_healing_actions_total{action="reportUnhealthy",adapter="hci0"}"#) ?? 0) >= 1
            }
            try await simulator.setPowered(true)
            try await waitUntil("the textfile says hci0 is healthy again", timeout: .seconds(30)) {
                sample(healthy) == 1
                    && (sample(#"keepalive_healing_actions_total{action="reportRecovered",adapter="hci0"}"#) ?? 0) >= 1
            }
        }
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let check = try await MetricsEndToEndTests.promtoolCheck(text)
        #expect(check.status == 0 && check.output.isEmpty, "promtool: \(check.output)\n\(text)")
    }
}
