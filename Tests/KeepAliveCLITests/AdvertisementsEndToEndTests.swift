import BlueZSimulator
import Foundation
import LocalServices
import TestHarness
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Passive sensors and gated polls through `keepalive run` against the simulator's advertising sensors (issue
/// #36): one record per device per tick with readings and units for BTHome (plain and encrypted), pvvx, MiBeacon
/// (encrypted) and Ruuvi; a device never heard is `notHeard`; a gated polled device gets no Connect while it is
/// silent, and is polled once it is heard.
@Suite("Advertisements end to end")
struct AdvertisementsEndToEndTests {
    typealias Address = SimulatedDevice.AdvertiserAddress
    typealias Key = SimulatedDevice.AdvertiserKey

    /// 5-s ticks, 15 s under a sanitizer: ThreadSanitizer on two slow cores let the first tick's 3.33-s window end
    /// before the daemon had heard anything ("never heard since start"), where the test wants the first record
    /// `newData`.
    static let configuration = """
        interval: \(5 * sanitizerSlowdown)s
        devices:
          - {name: porch, address: \(Address.bthome), advertisements: bthome}
          - {name: attic, address: \(Address.bthomeEncrypted), advertisements: bthome, key: \(Key.bthomeEncrypted)}
          - {name: kitchen, address: \(Address.pvvx), advertisements: pvvx}
          - {name: bedroom, address: \(Address.mibeacon), advertisements: mibeacon, key: \(Key.mibeacon)}
          - {name: fridge, address: \(Address.ruuvi), advertisements: ruuvi}
          - {name: garage, address: C0:FF:EE:02:00:09, advertisements: auto}
          - {name: shed, address: C0:FF:EE:00:00:01, read: [2a19], poll_when: heard}

        """

    /// Each record line as JSON.
    static func records(_ output: String) -> [[String: Any]] {
        output.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    static func reading(_ record: [String: Any], _ name: String) -> (value: Double?, unit: String?) {
        let reading = (record["readings"] as? [String: [String: Any]])?[name]
        return ((reading?["value"] as? NSNumber)?.doubleValue, reading?["unit"] as? String)
    }

    @Test func passiveSensorsGatedPollsAndSilenceThroughTheBinary() async throws {
        try await PrivateBus.with { bus in
            var simulated = BlueZSimulator.Configuration(
                adapters: ["hci0"],
                devices: .sensors(count: 1) + .advertisingSensors(interval: .milliseconds(500), repeats: 2))
            simulated.latencies.disconnect = .milliseconds(100)
            let simulator = try await BlueZSimulator.start(on: .address(bus.address), configuration: simulated)
            // The gated sensor is silent at start.
            try simulator.setAdvertising(false, device: "C0:FF:EE:00:00:01")
            let file = try TemporaryFile(name: "keepalive.yaml", contents: Self.configuration)
            defer { file.remove() }
            let process = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { process.terminate() }
            @Sendable func of(_ device: String) -> [[String: Any]] {
                Self.records(process.standardOutput).filter { $0["device"] as? String == device }
            }

            // Two ticks of everyone: the passive sensors' records, the silent ones', the gated one's.
            try await waitUntil("two ticks of every device", timeout: .seconds(60)) {
                ["porch", "attic", "kitchen", "bedroom", "fridge", "garage", "shed"].allSatisfy { of($0).count >= 2 }
            }
            for device in ["porch", "attic", "kitchen", "bedroom", "fridge"] {
                for record in of(device).prefix(2) {
                    #expect(record["source"] as? String == "advertisement", "\(device): \(record)")
                    #expect(["newData", "noData"].contains(record["result"] as? String ?? ""), "\(device): \(record)")
                    #expect((record["heard"] as? Int ?? 0) >= 1, "\(device): \(record)")
                    #expect(record["attempts"] as? Int == 0, "never connected: \(record)")
                    let temperature = Self.reading(record, "temperature")
                    #expect((-10...40).contains(temperature.value ?? -99), "\(device): \(record)")
                    #expect(temperature.unit == "°C", "\(device): \(record)")
                }
                let first = try #require(of(device).first)
                #expect(first["result"] as? String == "newData", "\(device): \(first)")
            }
            #expect(of("kitchen").first.map { Self.reading($0, "voltage").unit } == "V")
            #expect(of("fridge").first.map { Self.reading($0, "pressure").unit } == "hPa")
            #expect(of("attic").first?["format"] as? String == "bthome")
            #expect(of("bedroom").first?["format"] as? String == "mibeacon")
            for record in of("garage").prefix(2) {
                #expect(record["result"] as? String == "failed", "\(record)")
                #expect((record["error"] as? [String: Any])?["code"] as? String == "notHeard", "\(record)")
            }
            // The gated device: notHeard, and not one Connect sent.
            for record in of("shed").prefix(2) {
                #expect((record["error"] as? [String: Any])?["code"] as? String == "notHeard", "\(record)")
            }
            #expect(simulator.callCounts["Connect", default: 0] == 0, "\(simulator.callCounts)")
            // One record per device per tick: the ticks are consecutive for each device (sorted: records come in
            // completion order, and a tick skipped while the one before still waits in its window comes first).
            for device in ["porch", "garage", "shed"] {
                let ticks = of(device).compactMap { $0["tick"] as? Int }
                #expect(ticks.sorted() == Array(0..<ticks.count), "\(device): \(ticks)")
            }

            // Heard again: the next tick polls it.
            try simulator.setAdvertising(true, device: "C0:FF:EE:00:00:01")
            try await waitUntil("the gated device polled", timeout: .seconds(30)) {
                of("shed").contains { $0["result"] as? String == "newData" }
            }
            let polled = try #require(of("shed").first { $0["result"] as? String == "newData" })
            #expect(Self.reading(polled, "battery").unit == "%", "\(polled)")
            #expect((polled["heard"] as? Int ?? 0) >= 1, "\(polled)")
            #expect(simulator.callCounts["Connect", default: 0] >= 1)
            process.signal(SIGTERM)
            #expect(try await process.waitForExit(within: .seconds(15)) == 0)
            await simulator.stop()
        }
    }
}
