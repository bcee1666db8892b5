import LocalServices
import TestHarness
import KeepAliveDaemon
import Logging
import MQTT
@testable import MQTTBridge
import Testing

/// `interval:` in the file and an `interval/set` command read durations the same way: one grammar and one range
/// (DurationText), and one floor (`min_interval`, here 1ms). Forty spellings, right and wrong, go to both; the
/// answers must agree, value for value.
@Suite("One duration grammar")
struct OneDurationGrammarTests {
    static let spellings = [
        "30s", "2m", "1h", "500ms", "1.5s", "0.25m", "1.2345s", "0.000000001s", "24h", "23.999h",
        "30", "-1s", "+1s", "30 s", "30S", "1.s", ".5s", "1e3s", "s", "",
        "1,5s", "30sec", "1.0000000001s", "99999999999999999999h", "9223372036854775807h", "1..5s", "30x", "0s", "0ms",
        "25h", "24.001h", "1440m", "1441m", "86400s", "86400001ms", "10 m", "5 seconds", "0x10s", "3m0s", "1h30m",
    ]

    @Test func theConfigurationAndAnMQTTCommandGiveTheSameAnswerForFortySpellings() throws {
        #expect(Self.spellings.count == 40)
        let directory = try makeTemporaryDirectory(prefix: "grammar-test")
        defer { removeTree(directory) }
        let bridge = try MQTTBridge(
            configuration: BridgeConfiguration(
                mqtt: MQTTConfiguration(host: "127.0.0.1", port: 1, clientID: ""), gateway: "gw",
                spoolDirectory: directory),
            devices: [
                BridgeDevice(
                    name: "a", address: "C0:FF:EE:00:00:01", interval: .seconds(30), minimumInterval: .milliseconds(1))
            ],
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        var accepted = 0
        for spelling in Self.spellings {
            let file = """
                jitter: 0s
                min_interval: 1ms
                devices:
                  - name: a
                    address: C0:FF:EE:00:00:01
                    interval: "\(spelling)"
                    read: [2a19]
                """
            let fromFile = (try? ConfigurationLoader.parse(file, file: "grammar.yaml"))?.devices.first?.interval
            let message = MQTTMessage(
                topic: "keepalive/gw/a/interval/set", payload: Array(spelling.utf8), qos: .atLeastOnce, retain: false)
            let fromCommand: Duration? =
                switch bridge.parseCommand(message) {
                case .success(.setInterval(_, let interval)?): interval
                default: nil
                }
            #expect(
                fromFile == fromCommand,
                """
                    `\(spelling)`: the file says \(String(describing: fromFile)), a command \
                    \(String(describing: fromCommand))
                    """
            )
            if fromFile != nil { accepted += 1 }
        }
        #expect(accepted >= 10, "right spellings must be among the forty")
    }
}
