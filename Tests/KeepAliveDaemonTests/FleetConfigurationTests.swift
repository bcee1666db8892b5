import KeepAliveDaemon
import Logging
import Testing

/// `fleet:` and `shared:` in the configuration: the defaults, the derived protocol parameters, and each mistake
/// at its place.
@Suite("Fleet configuration")
struct FleetConfigurationTests {
    static let mqtt = "mqtt:\n  broker: mqtt://127.0.0.1:1883\n  gateway: gw-a\n"
    static let sharedDevice = "devices:\n  - {name: a, address: C0:FF:EE:00:00:01, read: [2a19], shared: true}\n"

    func parse(_ text: String) throws(ConfigurationError) -> DaemonConfiguration {
        try ConfigurationLoader.parse(text, file: "test.yaml")
    }

    func failure(_ text: String) -> ConfigurationError? {
        do {
            _ = try parse(text)
            return nil
        } catch {
            return error
        }
    }

    @Test func theDefaultsAndEverySetting() throws {
        let defaults = try #require(try parse(Self.mqtt + "fleet: {}\n" + Self.sharedDevice).fleet)
        #expect(defaults.lease == .seconds(30) && defaults.topicPrefix == "keepalive/fleet" && defaults.adapters == nil)
        #expect(defaults.scanEvery == .seconds(60) && defaults.scanFor == .seconds(5) && defaults.capacity == 64)
        let configuration = try parse(
            Self.mqtt + """
                fleet:
                  lease: 45s
                  topic_prefix: site/fleet
                  adapters: [hci0, hci1]
                  scan: {every: 2m, for: 10s}
                  capacity: 20
                devices:
                  - {name: a, address: C0:FF:EE:00:00:01, read: [2a19], shared: true}
                  - {name: b, address: C0:FF:EE:00:00:02, read: [2a19]}

                """)
        let fleet = try #require(configuration.fleet)
        #expect(fleet.lease == .seconds(45) && fleet.topicPrefix == "site/fleet" && fleet.adapters == ["hci0", "hci1"])
        #expect(fleet.scanEvery == .seconds(120) && fleet.scanFor == .seconds(10) && fleet.capacity == 20)
        #expect(configuration.sharedDevices.map(\.name) == ["a"], "only devices marked shared: true")
        #expect(
            try parse(Self.mqtt + "devices:\n  - {name: a, address: C0:FF:EE:00:00:01, read: [2a19]}\n").fleet == nil)
    }

    @Test(arguments: [
        // A shared device needs the fleet, the fleet needs the broker and a shared device.
        (
            "devices:\n  - {name: a, address: C0:FF:EE:00:00:01, read: [2a19], shared: true}\n", 2, 65,
            "devices[0].shared", "fleet:"
        ),
        ("fleet: {}\n" + sharedDevice, 1, 8, "fleet", "mqtt:"),
        (
            mqtt + "fleet: {}\ndevices:\n  - {name: a, address: C0:FF:EE:00:00:01, read: [2a19]}\n", 4, 8, "fleet",
            "shared: true"
        ),
        // A shared device is listed once: the fleet picks the adapter.
        (
            mqtt + "fleet: {}\n" + sharedDevice
                + "  - {name: b, address: C0:FF:EE:00:00:01, adapter: hci1, read: [2a19], shared: true}\n",
            7, 80, "devices[1].shared", "a shared device once"
        ),
        // Values.
        (mqtt + "fleet: {lease: 1s}\n" + sharedDevice, 4, 16, "fleet.lease", "from 3s to 1h"),
        // At the lease itself: the rule is about its length.
        (mqtt + "fleet: {lease: 3s}\n" + sharedDevice, 4, 16, "fleet.lease", "does not fit a poll"),
        (mqtt + "fleet: {topic_prefix: a/+/b}\n" + sharedDevice, 4, 23, "fleet.topic_prefix", "topic prefix"),
        (mqtt + "fleet: {adapters: [hci0, hci0]}\n" + sharedDevice, 4, 26, "fleet.adapters[1]", "twice"),
        (mqtt + "fleet: {adapters: [bt0]}\n" + sharedDevice, 4, 20, "fleet.adapters[0]", "adapter name"),
        (mqtt + "fleet: {scan: {every: 5s, for: 5s}}\n" + sharedDevice, 4, 15, "fleet.scan", "shorter than `every`"),
        (mqtt + "fleet: {capacity: 0}\n" + sharedDevice, 4, 19, "fleet.capacity", "from 1 to 100000"),
        (mqtt + "fleet: {leas: 30s}\n" + sharedDevice, 4, 9, "fleet.leas", "did you mean `lease`"),
        (
            mqtt + "fleet: {}\ndevices:\n  - {name: a, address: C0:FF:EE:00:00:01, read: [2a19], shared: perhaps}\n", 6,
            65, "devices[0].shared", "true or false"
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

    @Test func aFleetDaemonRefusesMaxTicks() throws {
        let configuration = try parse(Self.mqtt + "fleet: {}\n" + Self.sharedDevice)
        #expect(throws: Daemon.DaemonError.self) {
            _ = try Daemon(
                configuration: configuration, options: .init(maxTicks: 3, notifier: nil), logger: Logger(label: "test"))
        }
    }

    @Test func aConfigurationBuiltInCodeIsCheckedToo() throws {
        var configuration = try parse(Self.mqtt + "fleet: {}\n" + Self.sharedDevice)
        configuration.mqtt = nil
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
        configuration = try parse(Self.mqtt + "fleet: {}\n" + Self.sharedDevice)
        configuration.fleet = nil
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
    }
}
