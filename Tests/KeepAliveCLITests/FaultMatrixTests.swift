import BlueZSimulator
import DBus
import LocalServices
import TestHarness
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The fault matrix end to end (issue #9): `keepalive run` against the simulator, one fault at a time on
/// sensor 1 (or on the whole stack). For each: the daemon keeps running, sensor 1's ticks fail with a typed
/// record while the fault lasts, the first tick after it clears succeeds, every tick of every device has
/// exactly one record, no window is left open and no device is left connected.
@Suite("Fault matrix through keepalive run", .serialized)
struct FaultMatrixTests {
    struct Fault: Sendable, CustomTestStringConvertible {
        var name: String
        var inject: @Sendable (BlueZSimulator) async throws -> Void
        var clear: @Sendable (BlueZSimulator) async throws -> Void
        var testDescription: String { name }
    }

    static let sensor1 = "C0:FF:EE:00:00:01"

    static let faults: [Fault] = [
        Fault(
            name: "connect aborted", inject: { try await $0.inject(.connectAbort(count: 1_000), device: sensor1) },
            clear: { try $0.clearFault("connect-abort", device: sensor1) }),
        Fault(
            name: "InProgress", inject: { try await $0.inject(.inProgress, device: sensor1) },
            clear: { try $0.clearFault("in-progress", device: sensor1) }),
        Fault(
            name: "read hangs until the ATT timeout", inject: { try await $0.inject(.readHang, device: sensor1) },
            clear: { try $0.clearFault("read-hang", device: sensor1) }),
        Fault(
            name: "ATT error", inject: { try await $0.inject(.attError(0x0e), device: sensor1) },
            clear: { try $0.clearFault("att-error", device: sensor1) }),
        Fault(
            name: "device absent", inject: { try await $0.inject(.absent, device: sensor1) },
            clear: { try $0.clearFault("absent", device: sensor1) }),
        Fault(
            name: "device vanishes", inject: { try await $0.inject(.vanish, device: sensor1) },
            clear: { try $0.clearFault("vanish", device: sensor1) }),
        Fault(name: "bluetoothd crashes", inject: { await $0.crash() }, clear: { try await $0.restart() }),
        Fault(name: "bluetoothd restarts gracefully", inject: { _ in }, clear: { try await $0.restart() }),
        Fault(
            name: "adapter powered off", inject: { try await $0.setPowered(false) },
            clear: { try await $0.setPowered(true) }),
        Fault(
            name: "adapter rfkill-blocked", inject: { try await $0.setBlocked(true) },
            clear: { simulator in
                try await simulator.setBlocked(false)
                try await simulator.setPowered(true)
            }),
    ]

    @Test(arguments: faults)
    func theDaemonRidesOutTheFaultAndRecordsEveryTick(_ fault: Fault) async throws {
        try await PrivateBus.with { bus in
            var configuration = BlueZSimulator.Configuration(adapters: ["hci0"], devices: .sensors(count: 2))
            // BlueZ's timings, shortened so that each fault plays out in a few 1-s ticks.
            configuration.latencies.disconnect = .milliseconds(100)
            configuration.latencies.connectAbort = .milliseconds(300)
            configuration.latencies.attTimeout = .milliseconds(400)
            configuration.latencies.restart = .milliseconds(200)
            let simulator = try await BlueZSimulator.start(on: .address(bus.address), configuration: configuration)
            let file = try TemporaryFile(
                name: "keepalive.yaml", contents: CLITests.configuration(devices: 2, interval: "1s"))
            defer { file.remove() }
            let process = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { process.terminate() }
            @Sendable func sensor1Records() -> [String] {
                CLITests.records(process.standardOutput).filter { $0.device == "sensor-1" }.map(\.line)
            }
            try await waitUntil("sensor 1 polled", timeout: .seconds(20)) {
                sensor1Records().contains { $0.contains("\"result\":\"newData\"") }
            }

            try await fault.inject(simulator)
            let injectedAt = sensor1Records().count
            if fault.name != "bluetoothd restarts gracefully" {
                try await waitUntil("a failed record for sensor 1", timeout: .seconds(20)) {
                    sensor1Records().dropFirst(injectedAt).contains { $0.contains("\"result\":\"failed\"") }
                }
            }
            try await fault.clear(simulator)
            let clearedAt = sensor1Records().count
            // The first tick after the fault clears succeeds: skipped ticks (backoff) may come first, and the
            // tick in flight when it cleared may still fail; the next full poll must not.
            try await waitUntil("sensor 1 polled again after the fault", timeout: .seconds(30)) {
                sensor1Records().dropFirst(clearedAt + 1).contains {
                    $0.contains("\"result\":\"newData\"") || $0.contains("\"result\":\"noData\"")
                }
            }
            let afterClear = sensor1Records().dropFirst(clearedAt + 1)
            // With the whole suite beside it, a poll can outlast its 666-ms window for no reason of the fault's (a
            // Connect took 678 ms under a sanitizer, and over 600 ms on the stock executors in a local CI run): the
            // first poll that did not run out of time counts (and a later one must succeed: the wait above).
            let firstPoll = afterClear.first { record in
                !record.contains("\"code\":\"skipped\"") && !record.contains("\"code\":\"windowExpired\"")
            }
            #expect(
                firstPoll?.contains("\"result\":\"failed\"") == false,
                "\(fault.name): first poll after clearing: \(firstPoll ?? "none")")
            #expect(process.exitStatus == nil, "\(fault.name): the daemon stopped: \(process.standardError)")

            process.signal(SIGTERM)
            #expect(try await process.waitForExit(within: .seconds(10)) == 0, "\(process.standardError)")
            let records = CLITests.records(process.standardOutput)
            #expect(records.map(\.seq) == Array(0..<records.count), "\(fault.name): seq not contiguous")
            for device in ["sensor-1", "sensor-2"] {
                let ticks = records.filter { $0.device == device }.compactMap { record -> Int? in
                    guard let range = record.line.range(of: "\"tick\":") else { return nil }
                    return Int(record.line[range.upperBound...].prefix { $0.isNumber })
                }
                // Records come in completion order: a tick skipped for overlap is recorded while the poll before it
                // is still ending (TSan with the whole suite beside it wrote ticks 1, 0, 2 …). One each, none lost.
                #expect(
                    ticks.sorted() == Array(0..<ticks.count), "\(fault.name) \(device): one record per tick: \(ticks)")
            }
            #expect(process.standardError.contains("openWindows=0"), "\(fault.name): \(process.standardError)")
            #expect(
                records.allSatisfy { !$0.line.contains("\"outcome\":\"forcedEnd\"") },
                "\(fault.name): a window was force-ended")
            try await CLITests.expectAllDisconnected(simulator)
            await simulator.stop()
        }
    }
}
