import KeepAliveDaemon
import Polling
import Testing

/// `history:` and `clock_sync:` on a device, the profiles that allow them, and each mistake at its place.
@Suite("History and clock configuration")
struct DeferredConfigurationTests {
    func parse(_ device: String) throws(ConfigurationError) -> DaemonConfiguration {
        try ConfigurationLoader.parse("state_directory: /tmp/ka\ndevices:\n  - " + device + "\n", file: "test.yaml")
    }

    func failure(_ device: String) -> ConfigurationError? {
        do {
            _ = try parse(device)
            return nil
        } catch {
            return error
        }
    }

    @Test func aMiFloraDownloadsItsHistoryAndALYWSD03MMCTakesTheTime() throws {
        let fern = try #require(
            try parse("{name: fern, address: C0:FF:EE:01:00:01, profile: mi-flora, history: 12h}").devices.first)
        #expect(fern.history == .init(every: .seconds(43_200), onBattery: false, format: .miFlora))
        let mapped = try #require(
            try parse("{name: fern, address: C0:FF:EE:01:00:01, profile: mi-flora, history: {on_battery: true}}")
                .devices.first)
        #expect(mapped.history == .init(every: .seconds(86_400), onBattery: true, format: .miFlora), "a day by default")
        let configuration = try parse("{name: bed, address: C0:FF:EE:01:00:02, profile: lywsd03mmc, clock_sync: 24h}")
        #expect(configuration.stateDirectory == "/tmp/ka")
        let bed = try #require(configuration.devices.first)
        #expect(bed.clockSync?.every == .seconds(86_400))
        #expect(bed.clockSync?.clock.characteristic == (try BluetoothUUID("ebe0ccb7-7a0a-4b0c-8a1a-6ff2997da3a6")))
        #expect(bed.clockSync?.clock.format == .unixTime32TimeZone8)
        #expect(bed.history == nil)
    }

    @Test(arguments: [
        (
            "{name: bed, address: C0:FF:EE:01:00:02, profile: lywsd03mmc, history: 24h}", 3, 75, "devices[0].history",
            "the profile `lywsd03mmc` declares no history; profiles with one: mi-flora"
        ),
        (
            "{name: x, address: C0:FF:EE:01:00:02, read: [2a19], history: 24h}", 3, 66, "devices[0].history",
            "needs a `profile:` that declares a history"
        ),
        (
            "{name: fern, address: C0:FF:EE:01:00:01, profile: mi-flora, clock_sync: 1d}", 3, 77,
            "devices[0].clock_sync", "profiles with one: lywsd03mmc"
        ),
        (
            "{name: fern, address: C0:FF:EE:01:00:01, profile: mi-flora, history: 10s}", 3, 74, "devices[0].history",
            "at least 1m"
        ),
        (
            "{name: fern, address: C0:FF:EE:01:00:01, profile: mi-flora, history: {every: 1h, battery: true}}", 3,
            86, "devices[0].history.battery", "on_battery"
        ),
    ])
    func eachMistakeIsRefusedWhereItIsWritten(yaml: String, line: Int, column: Int, field: String, text: String) {
        let error = failure(yaml)
        #expect(
            error?.location == SourceLocation(file: "test.yaml", line: line, column: column),
            "\(String(describing: error))")
        #expect(error?.field == field, "\(String(describing: error))")
        #expect(error?.message.contains(text) == true, "\(String(describing: error))")
    }

    @Test func aProfileMaySayItsHistoryAndClockAndNothingElse() throws {
        let profile = try ConfigurationLoader.profile(
            """
            profile: clocky
            read: [2a19]
            clock: {uuid: ebe0ccb7-7a0a-4b0c-8a1a-6ff2997da3a6, format: unix32le-tz8}
            history: mi-flora
            """, file: "clocky.yaml")
        #expect(profile.history == .miFlora && profile.clock?.format == .unixTime32TimeZone8)
        #expect {
            try ConfigurationLoader.profile("profile: p\nread: [2a19]\nhistory: ruuvi\n", file: "p.yaml")
        } throws: { "\($0)".contains("`ruuvi` is not a history format this daemon reads (mi-flora)") }
        #expect {
            try ConfigurationLoader.profile(
                "profile: p\nread: [2a19]\nclock: {uuid: 2a2b, format: iso}\n", file: "p.yaml")
        } throws: { "\($0)".contains("`iso` is not a clock format this daemon writes (unix32le-tz8)") }
    }
}
