import KeepAlive
import Polling
import KeepAliveDaemon
import Basics

#if canImport(Glibc)
    import Glibc
#endif

/// The demo's friendly view of records: a rule per tick, a line per device, readings decoded where the
/// Bluetooth SIG says how (battery %, temperature °C), hex otherwise.
final class DemoView: Sendable {
    let configuration: DaemonConfiguration
    /// The newest tick a rule was drawn for: later records of older ticks print under the current rule.
    private let lastHeader = Locked<KeepAliveInstant?>(nil)
    private let colour = standardOutputIsTerminal
    /// What the MQTT bridge has done so far (`mqtt 12 delivered`), for the rule of each tick; set once the
    /// daemon exists.
    let bridgeSummary = Locked<(@Sendable () -> String)?>(nil)

    init(configuration: DaemonConfiguration) {
        self.configuration = configuration
    }

    func banner(busAddress: String) -> String {
        let budget = configuration.keepAliveConfiguration.budget(forInterval: configuration.interval)
        return """
            \(bold("KeepAlive demo")): \(configuration.devices.count) simulated sensors, no hardware, no root \
            (Ctrl-C to stop)
              bus        \(busAddress) (a private dbus-daemon; a simulated bluetoothd 5.66 owns org.bluez)
              config     the embedded example keepalive.yaml, intervals scaled: every \
            \(configuration.interval.compact), windows of \(budget.compact), at most \
            \(configuration.maxConnections) links per adapter
              try        DBUS_SYSTEM_BUS_ADDRESS=\(busAddress) keepalive scan   (in another terminal)
            \(mqttLines)
            """
    }

    private var mqttLines: String {
        guard let mqtt = configuration.mqtt else { return "" }
        let gateway = mqtt.gateway ?? "?"
        return """
              mqtt       \(mqtt.brokerDescription) (a private mosquitto): every record on \
            \(mqtt.topicPrefix)/\(gateway)/<device>/state, Home Assistant discovery on \(mqtt.discoveryPrefix)/
              watch      mosquitto_sub -h \(mqtt.host) -p \(mqtt.port) -t '\(mqtt.topicPrefix)/#' \
            -t '\(mqtt.discoveryPrefix)/#' -v

            """
    }

    func render(_ record: PollRecord) -> String {
        var text = ""
        lastHeader.withLock { last in
            if last.map({ $0.duration(to: record.scheduled) > .milliseconds(500) }) ?? true {
                last = record.scheduled
                let summary = bridgeSummary.withLock { $0 }.map { " \($0()) " } ?? " "
                text +=
                    dim(
                        "── \(WallClockText.now())\(summary)"
                            + String(repeating: "─", count: max(8, 60 - summary.count))) + "\n"
            }
        }
        let mark: String
        switch record.result {
        case .newData: mark = green("✓")
        case .noData: mark = green("·")
        case .failed: mark = record.window == nil || record.isContention ? yellow("–") : red("✗")
        }
        var line = "  \(mark) \(record.device.padded(17)) "
        if let failure = record.failure {
            // A skipped tick or a wait for a slot is not the device's failure: yellow, without its code.
            let notTheDevice = record.window == nil || record.isContention
            line += (notTheDevice ? yellow(failure.message) : red(failure.message))
            if !notTheDevice {
                line += dim(
                    """
                         [\(failure.code), \(failure.transient ? "transient" : "permanent"), \(record.attempts) \
                        attempt\(record.attempts == 1 ? "" : "s")]
                        """
                )
            }
        } else {
            line += record.readings.map { reading in
                reading.value == nil ? red(reading.description) : reading.description
            }.joined(separator: "  ")
            if !record.notifications.isEmpty {
                line += dim(
                    "  (\(record.notifications.count) notification\(record.notifications.count == 1 ? "" : "s"))")
            }
        }
        if record.source == .advertisement, let heard = record.heard {
            // A passive sensor has no link to show: how often it was heard instead, and how strongly.
            let strength = heard.rssi.map { " at \($0) dBm" } ?? ""
            line += dim("  heard \(heard.count)×\(strength)")
        } else if let window = record.window {
            line += dim(
                """
                      window #\(window.id.rawValue) \(window.used.compact)/\(window.budget.compact) \
                    \(window.outcome.rawValue)
                    """
            )
        }
        if record.interval != configuration.interval, record.window != nil {
            line += dim(" every \(record.interval.compact)")
        }
        return text + line + "\n"
    }

    func footer(statistics: KeepAlive.Statistics, openWindows: Int, linksUp: Int) -> String {
        let skipped = statistics.skippedBackoff + statistics.skippedOverlap + statistics.refused
        return """

            stopped: \(statistics.callbacksRun) polls, \(statistics.failures) failed, \
            \(skipped) tick\(skipped == 1 ? "" : "s") skipped (\(statistics.skippedBackoff) backing off), \
            \(statistics.missedTicks) missed; \(openWindows) windows open, \(linksUp) links up

            """
    }

    private func bold(_ text: String) -> String { colour ? "\u{1B}[1m\(text)\u{1B}[0m" : text }
    private func dim(_ text: String) -> String { colour ? "\u{1B}[2m\(text)\u{1B}[0m" : text }
    private func green(_ text: String) -> String { colour ? "\u{1B}[32m\(text)\u{1B}[0m" : text }
    private func yellow(_ text: String) -> String { colour ? "\u{1B}[33m\(text)\u{1B}[0m" : text }
    private func red(_ text: String) -> String { colour ? "\u{1B}[31m\(text)\u{1B}[0m" : text }
}

/// `HH:MM:SS` local… in UTC, like the records.
enum WallClockText {
    static func now() -> String {
        var time = time(nil)
        var parts = tm()
        gmtime_r(&time, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) UTC"
    }
}
