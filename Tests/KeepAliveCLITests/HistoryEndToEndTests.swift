import BlueZSimulator
import Basics
import Foundation
import LocalServices
import TestHarness
import Testing

/// Issue #41 through the binary: a Mi Flora's history downloaded once (none twice across a SIGKILL), held while
/// the broker is away, and a LYWSD03MMC's clock set — against the simulator's Mi Flora (300 hourly entries) and
/// LYWSD03MMC (its clock at 2000-01-01).
@Suite("Sensor history and clocks through keepalive run", .serialized)
struct HistoryEndToEndTests {
    typealias Address = SimulatedDevice.ProfileAddress

    /// The history records of `output`, by their `measured` time, in order.
    static func history(_ output: String) -> [(measured: String, temperature: Double?, line: String)] {
        output.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                object["source"] as? String == "history", let measured = object["measured"] as? String
            else { return nil }
            let temperature = (object["readings"] as? [String: Any]).flatMap {
                ($0["temperature"] as? [String: Any])?["value"] as? Double
            }
            return (measured, temperature, String(line))
        }
    }

    /// `next` of the Mi Flora's saved history position (`history.json` in the state directory).
    static func savedNext(state: String) throws -> Int {
        let data = try Data(contentsOf: URL(fileURLWithPath: state + "/history.json"))
        let document = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let fern = (document?["devices"] as? [String: Any])?["fern"] as? [String: Any]
        return try #require(fern?["next"] as? Int, "\(String(decoding: data, as: UTF8.self))")
    }

    static func configuration(state: String, spool: String, port: Int, extra: String = "") -> String {
        """
        interval: 1h
        state_directory: \(state)
        devices:
          - name: fern
            address: \(Address.miFlora)
            profile: mi-flora
            history: {every: 24h, on_battery: true}
          - name: bedroom
            address: \(Address.lywsd03mmc)
            profile: lywsd03mmc
            clock_sync: 24h
        mqtt:
          broker: mqtt://127.0.0.1:\(port)
          gateway: gw
          spool: {path: \(spool)}
        \(extra)
        """
    }

    /// The simulator's profile sensors, a broker, a state directory and a spool; all removed after `body`.
    static func withSetup<T: Sendable>(
        _ body: @Sendable (PrivateBus, BlueZSimulator, MosquittoBroker, String, String) async throws -> T
    ) async throws -> T {
        try await PrivateBus.with { bus in
            var simulated = BlueZSimulator.Configuration(adapters: ["hci0"], devices: .profileSensors(adapter: "hci0"))
            simulated.latencies.disconnect = .milliseconds(100)
            let simulator = try await BlueZSimulator.start(on: .address(bus.address), configuration: simulated)
            let broker = try await MosquittoBroker.start(persistent: true)
            let state = try makeTemporaryDirectory(prefix: "keepalive-state")
            let spool = try makeTemporaryDirectory(prefix: "keepalive-spool")
            defer {
                broker.remove()
                _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", state, spool])
            }
            do {
                let result = try await body(bus, simulator, broker, state, spool)
                await simulator.stop()
                return result
            } catch {
                await simulator.stop()
                throw error
            }
        }
    }

    /// The wall time of each simulated entry: the device's clock read now, against the gateway's.
    static func expectedTimes(_ simulator: BlueZSimulator) throws -> [Double] {
        let deviceNow = Double(try simulator.historyDeviceTime(device: Address.miFlora))
        let wallNow = Date().timeIntervalSince1970
        return try simulator.historyEntries(device: Address.miFlora).map {
            wallNow - (deviceNow - Double($0.deviceTimestamp))
        }
    }

    static func seconds(_ rfc3339: String) -> Double? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: rfc3339)?.timeIntervalSince1970
    }

    @Test func threeHundredEntriesNoneLostEachWithItsOwnTimeAcrossASIGKILL() async throws {
        try await Self.withSetup { bus, simulator, broker, state, spool in
            let file = try TemporaryFile(
                name: "keepalive.yaml", contents: Self.configuration(state: state, spool: spool, port: broker.port))
            defer { file.remove() }
            let subscriber = try await MQTTBridgeEndToEndTests.Subscriber(port: broker.port)
            let arguments = ["run", "--config", file.path, "--bus", bus.address]

            // The first daemon is killed mid-download (each entry is a write and a read of 10 ms each).
            let first = try CommandProcess(arguments)
            defer { first.terminate() }
            try await waitUntil("a third of the history published", timeout: .seconds(60)) {
                Self.history(first.standardOutput).count >= 100
            }
            first.signal(SIGKILL)
            _ = try await first.waitForExit(within: .seconds(10))
            let before = Self.history(first.standardOutput)
            #expect(before.count < 300, "the download had not finished at the kill")
            // The position saved: after the last entry out, or (the kill between an entry's record and its save)
            // before it. Never after an entry that is not out.
            let saved = try Self.savedNext(state: state)
            #expect(saved == before.count || saved == before.count - 1, "next \(saved), \(before.count) out")

            let second = try CommandProcess(arguments)
            defer { second.terminate() }
            try await waitUntil("the rest published", timeout: .seconds(60)) {
                second.standardError.contains("history downloaded")
            }
            let after = Self.history(second.standardOutput)
            // None lost, none twice, but the one entry a kill can catch between its record and its save (README,
            // "History"; no order avoids it): published again, then with the very time and readings it had.
            let repeated = before.last.map { last in after.first?.measured == last.measured } ?? false
            #expect(repeated == (saved == before.count - 1), "a repeat, only of the entry whose save was cut off")
            if let last = before.last, repeated {
                print("history e2e: the entry in flight at the kill was published again: \(last.measured)")
                #expect(after.first?.temperature == last.temperature)
            }
            let all = before + after.dropFirst(repeated ? 1 : 0)
            #expect(all.count == 300, "\(before.count) before the kill, \(after.count) after")
            #expect(Set(all.map(\.measured)).count == all.count, "no entry twice")
            // The device read each entry once, but for the one in flight at the kill and the check of the last
            // one published.
            #expect(try simulator.historyEntryReads(device: Address.miFlora) <= 300 + 2)

            // Each with its own time: the device's clock corrected to the gateway's, within a second.
            let expected = try Self.expectedTimes(simulator)
            let measured = all.compactMap { Self.seconds($0.measured) }.sorted()
            #expect(measured.count == 300)
            for (got, want) in zip(measured, expected.sorted()) where abs(got - want) > 1.5 {
                Issue.record("an entry measured at \(got), expected \(want)")
                break
            }
            #expect(expected.count == 300)
            // The hours are an hour apart, oldest first.
            #expect(all.map(\.measured) == all.map(\.measured).sorted())

            // To MQTT on the history topic (at least once: the kill may send one again), never as the state.
            @Sendable func delivered() -> Set<String> {
                Set(
                    subscriber.messages("keepalive/gw/fern/history").compactMap {
                        Self.history(String(decoding: $0.payload, as: UTF8.self)).first?.measured
                    })
            }
            // Given up only after 30 s (more under a sanitizer) in which none arrived: CI's loaded `make test` once
            // ran out of a fixed 30 s here and could not say whether delivery had stopped or was slow.
            let quiet = Duration.seconds(30) * Sanitizers.slowdown
            var count = delivered().count
            var giveUp = ContinuousClock.now + quiet
            while count < 300, ContinuousClock.now < giveUp {
                try await Task.sleep(for: .milliseconds(20))
                let now = delivered().count
                if now > count { (count, giveUp) = (now, ContinuousClock.now + quiet) }
            }
            if count < 300 {
                // What the next failure needs: which records are missing (from before the kill or after), and what
                // the second daemon said about its broker and spool.
                let missing = Set(all.map(\.measured)).subtracting(delivered())
                let missingBefore = before.filter { missing.contains($0.measured) }.count
                let said = second.standardError.split(separator: "\n").filter {
                    $0.contains("mqtt") || $0.contains("MQTT") || $0.contains("spool") || $0.contains("broker")
                }
                Issue.record(
                    """
                    no history record delivered for \(quiet): \(count) of 300; \(missing.count) missing, \
                    \(missingBefore) of them published before the kill (\(before.count) were); first missing: \
                    \(missing.sorted().prefix(3)); the second daemon on its broker and spool:
                    \(said.suffix(30).joined(separator: "\n"))
                    """)
                return
            }
            #expect(
                !subscriber.messages("keepalive/gw/fern/state").contains {
                    String(decoding: $0.payload, as: UTF8.self).contains("\"source\":\"history\"")
                })
            second.signal(SIGTERM)
            #expect(try await second.waitForExit(within: .seconds(15)) == 0, "\(second.standardError.suffix(2_000))")
            await subscriber.close()

            // A third start has nothing new to publish.
            let third = try CommandProcess(arguments)
            defer { third.terminate() }
            try simulator.appendHistoryEntries(2, device: Address.miFlora)
            // The pending request waits its 24 h: the third run downloads only if asked. Its state says so.
            try await waitUntil("the daemon polled once", timeout: .seconds(30)) {
                third.standardOutput.contains("\"device\":\"fern\"")
            }
            #expect(Self.history(third.standardOutput).isEmpty, "the next download waits for its day")
            let pending = try String(contentsOfFile: state + "/deferred.json", encoding: .utf8)
            #expect(pending.contains("\"identifier\":\"history.fern\""), "\(pending)")
        }
    }

    @Test func theDownloadWaitsWhileTheBrokerIsAwayAndStartsWhenItReturns() async throws {
        try await Self.withSetup { bus, simulator, broker, state, spool in
            let file = try TemporaryFile(
                name: "keepalive.yaml", contents: Self.configuration(state: state, spool: spool, port: broker.port))
            defer { file.remove() }
            broker.kill()
            let daemon = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { daemon.terminate() }
            // The polls go on (the clock sync too: it needs no network); the download does not start.
            try await waitUntil("both devices polled and the clock set", timeout: .seconds(30)) {
                daemon.standardOutput.contains("\"device\":\"fern\"")
                    && daemon.standardOutput.contains("\"device\":\"bedroom\"")
                    && daemon.standardError.contains("clock set")
            }
            #expect(Self.history(daemon.standardOutput).isEmpty)
            #expect(try simulator.historyEntryReads(device: Address.miFlora) == 0)
            let restarted = try await broker.restart()
            defer { restarted.remove() }
            try await waitUntil("the download started and finished", timeout: .seconds(60)) {
                daemon.standardError.contains("history downloaded")
            }
            #expect(Self.history(daemon.standardOutput).count == 300)
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(within: .seconds(15)) == 0, "\(daemon.standardError.suffix(3_000))")
        }
    }

    @Test func theLYWSD03MMCsClockIsSetToTheGatewaysWithinASecond() async throws {
        try await Self.withSetup { bus, simulator, broker, state, spool in
            let before = try simulator.deviceClock(device: Address.lywsd03mmc)
            #expect(before.unixSeconds < 1_000_000_000, "the simulated clock starts in 2000")
            let file = try TemporaryFile(
                name: "keepalive.yaml", contents: Self.configuration(state: state, spool: spool, port: broker.port))
            defer { file.remove() }
            let daemon = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { daemon.terminate() }
            try await waitUntil("the clock set", timeout: .seconds(30)) { daemon.standardError.contains("clock set") }
            let clock = try simulator.deviceClock(device: Address.lywsd03mmc)
            // The write waits for the second to turn, so only its latency (and this read's) is left; before it
            // did, truncating to the second cost up to one more (1.01 s was seen on CI).
            let offset = clock.unixSeconds - Date().timeIntervalSince1970
            print("clock sync e2e: the sensor's clock is \(offset) s from the gateway's")
            #expect(abs(offset) < 1.0, "\(clock)")
            var now = time(nil)
            var parts = tm()
            localtime_r(&now, &parts)
            #expect(Int(clock.timezoneHours) == parts.tm_gmtoff / 3_600)
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(within: .seconds(15)) == 0, "\(daemon.standardError.suffix(3_000))")
        }
    }
}
