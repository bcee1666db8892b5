import BlueZSimulator
import LocalServices
import TestHarness
import Foundation
import Testing

/// Readings through the binary: `keepalive run` against the simulator's profile sensors, each device by its
/// shipped profile; the records carry the decoded readings with units, the 0x2904 device decoded by its
/// descriptor, a negative temperature negative.
@Suite("Readings end to end")
struct ReadingsEndToEndTests {
    static let configuration = """
        interval: 10s
        max_connections: 3
        devices:
          - {name: fern, address: C0:FF:EE:01:00:01, profile: mi-flora}
          - name: bedroom
            address: C0:FF:EE:01:00:02
            profile: lywsd03mmc
            notify: [{uuid: ebe0ccc1-7a0a-4b0c-8a1a-6ff2997da3a6, for: 1s}]
          - name: freezer
            address: C0:FF:EE:01:00:03
            profile: environmental-sensing
            read: [{uuid: 4b410102-6b65-6570-616c-697665000000, name: probe_temperature}]
          - {name: runner, address: C0:FF:EE:01:00:04, profile: heart-rate, notify: [{uuid: 2a37, for: 1s}]}
          - {name: patient, address: C0:FF:EE:01:00:05, profile: health-thermometer, notify: [{uuid: 2a1c, for: 1s}]}

        """

    /// `readings` of each device's record: name → (value, unit).
    static func readings(_ stdout: String) throws -> [String: [String: (value: Any, unit: String?)]] {
        var byDevice: [String: [String: (value: Any, unit: String?)]] = [:]
        for line in stdout.split(separator: "\n") {
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
            let device = try #require(object["device"] as? String)
            #expect(object["result"] as? String == "newData", "\(line)")
            let readings = try #require(object["readings"] as? [String: [String: Any]], "\(line)")
            byDevice[device] = readings.mapValues { ($0["value"] ?? NSNull(), $0["unit"] as? String) }
        }
        return byDevice
    }

    func number(_ reading: (value: Any, unit: String?)?) -> Double? {
        (reading?.value as? NSNumber)?.doubleValue
    }

    @Test func eachShippedProfilesDeviceGivesItsReadingsWithUnits() async throws {
        try await PrivateBus.with { bus in
            var simulated = BlueZSimulator.Configuration(
                adapters: ["hci0"], devices: .profileSensors(adapter: "hci0", notifyInterval: .milliseconds(200)))
            simulated.latencies.disconnect = .milliseconds(100)
            let simulator = try await BlueZSimulator.start(on: .address(bus.address), configuration: simulated)
            let file = try TemporaryFile(name: "keepalive.yaml", contents: Self.configuration)
            defer { file.remove() }
            let result = try await CommandProcess.run([
                "run", "--config", file.path, "--bus", bus.address, "--ticks", "1",
            ])
            await simulator.stop()
            #expect(result.status == 0, "stderr: \(result.stderr.suffix(2_000))")
            let devices = try Self.readings(result.stdout)
            #expect(devices.keys.sorted() == ["bedroom", "fern", "freezer", "patient", "runner"])

            // Mi Flora: the mode write came first, so the values are fresh (the placeholder would be out of range).
            let fern = try #require(devices["fern"])
            #expect(number(fern["temperature"]) == 23.4 && fern["temperature"]?.unit == "°C")
            #expect(number(fern["light"]) == 1234 && fern["light"]?.unit == "lx")
            #expect(number(fern["moisture"]) == 41 && fern["moisture"]?.unit == "%")
            #expect(number(fern["conductivity"]) == 567 && fern["conductivity"]?.unit == "µS/cm")
            #expect(number(fern["battery"]) == 97 && fern["battery"]?.unit == "%")
            #expect(fern["firmware"]?.value as? String == "3.2.1")

            // LYWSD03MMC: the last notification of the second (22.51 °C + n × 0.01, 48 % + n mod 3).
            let bedroom = try #require(devices["bedroom"])
            #expect(
                (22.51...22.60).contains(number(bedroom["temperature"]) ?? 0) && bedroom["temperature"]?.unit == "°C")
            #expect((48...50).contains(number(bedroom["humidity"]) ?? 0) && bedroom["humidity"]?.unit == "%")
            #expect(number(bedroom["voltage"]) == 2.981 && bedroom["voltage"]?.unit == "V")

            // Environmental Sensing: a negative SIG temperature, and the probe decoded by its 0x2904 descriptor.
            let freezer = try #require(devices["freezer"])
            #expect(number(freezer["temperature"]) == -7.25 && freezer["temperature"]?.unit == "°C")
            #expect(number(freezer["humidity"]) == 55.5 && freezer["humidity"]?.unit == "%")
            #expect(number(freezer["probe_temperature"]) == -18.25 && freezer["probe_temperature"]?.unit == "°C")

            let runner = try #require(devices["runner"])
            #expect((72...74).contains(number(runner["heart_rate"]) ?? 0) && runner["heart_rate"]?.unit == "bpm")
            let patient = try #require(devices["patient"])
            #expect(
                (36.54...36.58).contains(number(patient["temperature"]) ?? 0) && patient["temperature"]?.unit == "°C")
        }
    }

    /// `keepalive profiles` says which shipped sensors keep a log to download and which take the time, in text and
    /// in JSON: what `history:` and `clock_sync:` need of a device's profile.
    @Test func theProfilesCommandSaysWhichSensorsKeepALogOrAClock() async throws {
        let text = try await CommandProcess.run(["profiles"])
        #expect(text.status == 0, "stderr: \(text.stderr)")
        #expect(text.stdout.contains("  history   mi-flora: the sensor's own log, downloaded with `history:`"))
        #expect(
            text.stdout.contains(
                "  clock     ebe0ccb7-7a0a-4b0c-8a1a-6ff2997da3a6 (unix32le-tz8), set with `clock_sync:`"))
        #expect(text.stdout.components(separatedBy: "  history ").count == 2, "only the Mi Flora keeps one")

        let json = try await CommandProcess.run(["profiles", "--json"])
        #expect(json.status == 0, "stderr: \(json.stderr)")
        var byName: [String: [String: Any]] = [:]
        for line in json.stdout.split(separator: "\n") {
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
            byName[try #require(object["name"] as? String)] = object
        }
        #expect(byName["mi-flora"]?["history"] as? String == "mi-flora")
        let clock = try #require(byName["lywsd03mmc"]?["clock"] as? [String: Any])
        #expect(clock["uuid"] as? String == "ebe0ccb7-7a0a-4b0c-8a1a-6ff2997da3a6")
        #expect(clock["format"] as? String == "unix32le-tz8")
        #expect(byName["battery"]?["history"] == nil && byName["battery"]?["clock"] == nil)
    }
}
