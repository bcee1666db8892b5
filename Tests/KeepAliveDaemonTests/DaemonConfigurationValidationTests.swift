import KeepAlive
import Polling
import KeepAliveDaemon
import Logging
import Testing

/// A `DaemonConfiguration` built in code goes through the configuration file's checks: the daemon refuses it
/// with a ``ConfigurationError`` naming the field, never a trap.
@Suite("DaemonConfiguration built in code")
struct DaemonConfigurationValidationTests {
    let battery = BluetoothUUID(assigned: 0x2A19)

    func configuration(
        _ devices: [DaemonConfiguration.Device], _ change: (inout DaemonConfiguration) -> Void = { _ in }
    ) -> DaemonConfiguration {
        var configuration = DaemonConfiguration()
        configuration.devices = devices
        change(&configuration)
        return configuration
    }

    func refusal(_ configuration: DaemonConfiguration) -> ConfigurationError? {
        do {
            _ = try Daemon(
                configuration: configuration, options: Daemon.Options(writesRecords: false),
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
            )
            return nil
        } catch let error as ConfigurationError {
            return error
        } catch {
            Issue.record("not a ConfigurationError: \(error)")
            return nil
        }
    }

    @Test func aValidConfigurationIsAccepted() throws {
        let valid = configuration([.init(name: "cold-room", address: "C0:FF:EE:00:00:03", reads: [battery])])
        try valid.validate()
        #expect(refusal(valid) == nil)
    }

    @Test func eachValueThatCannotWorkIsRefusedNamingItsField() {
        let sensor = DaemonConfiguration.Device(name: "cold-room", address: "C0:FF:EE:00:00:03", reads: [battery])
        let cases: [(DaemonConfiguration, String)] = [
            (configuration([sensor]) { $0.interval = .zero }, "interval"),
            (configuration([sensor]) { $0.windowBudget = .seconds(30) }, "window_budget"),
            (configuration([sensor]) { $0.jitter = .seconds(45) }, "jitter"),
            (configuration([sensor]) { $0.maxConnections = 0 }, "max_connections"),
            (configuration([sensor]) { $0.adapter = "bluetooth0" }, "adapter"),
            (configuration([sensor]) { $0.lowPower = LowPowerPolicy(lowPowerMultiplier: 0) }, "low_power.multiplier"),
            (configuration([]), "devices"),
            (
                configuration([sensor, .init(name: "cold-room", address: "C0:FF:EE:00:00:04", reads: [battery])]),
                "devices[1].name"
            ),
            (
                configuration([sensor, .init(name: "twin", address: "c0:ff:ee:00:00:03", reads: [battery])]),
                "devices[1].address"
            ),
            (configuration([.init(name: "typo", address: "C0:FF:EE:00:00", reads: [battery])]), "devices[0].address"),
            (
                configuration([
                    .init(
                        name: "slow", address: "C0:FF:EE:00:00:05", interval: .seconds(10), budget: .seconds(10),
                        reads: [battery])
                ]), "devices[0].budget"
            ),
            (
                configuration([.init(name: "zero", address: "C0:FF:EE:00:00:05", interval: .zero, reads: [battery])]),
                "devices[0].interval"
            ),
            (
                configuration([
                    .init(
                        name: "long", address: "C0:FF:EE:00:00:05", budget: .seconds(5),
                        notifications: [.init(characteristic: battery, duration: .seconds(5))])
                ]),
                "devices[0].notify[0].for"
            ),
            (configuration([.init(name: "idle", address: "C0:FF:EE:00:00:05")]), "devices[0]"),
            // Rules the file loader used to check on its own: now validate()'s, for a configuration made in code too.
            (
                configuration([
                    .init(
                        name: "deaf", address: "C0:FF:EE:00:00:05",
                        notifications: [.init(characteristic: battery, duration: .seconds(2), silence: .seconds(2))])
                ]),
                "devices[0].notify[0].expect_every"
            ),
            // The floor (`min_interval`, 5 s by default), the rule an `interval/set` command obeys too.
            (configuration([sensor]) { $0.interval = .seconds(1) }, "interval"),
            (configuration([sensor]) { $0.minInterval = .zero }, "min_interval"),
            (
                configuration([
                    .init(name: "fast", address: "C0:FF:EE:00:00:05", interval: .seconds(2), reads: [battery])
                ]), "devices[0].interval"
            ),
            (
                configuration([
                    .init(name: "spared", address: "C0:FF:EE:00:00:05", minInterval: .seconds(60), reads: [battery])
                ]), "devices[0].min_interval"
            ),
        ]
        for (configuration, field) in cases {
            let error = refusal(configuration)
            #expect(error?.field == field, "expected \(field), got \(String(describing: error))")
            #expect(error.map { !$0.message.isEmpty } == true)
        }
    }

    @Test func anEntryFromAFileIsNamedAtItsLocation() {
        let located = DaemonConfiguration.Device(
            name: "slow", address: "C0:FF:EE:00:00:05", interval: .seconds(10), budget: .seconds(11), reads: [battery],
            location: SourceLocation(file: "gateway.yaml", line: 12, column: 5)
        )
        let error = refusal(configuration([located]))
        #expect(
            error?.description.hasPrefix("gateway.yaml:12:5: devices[0].budget: ") == true,
            "\(String(describing: error))")
    }
}
