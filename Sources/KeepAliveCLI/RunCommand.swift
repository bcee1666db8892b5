import ArgumentParser
import Basics
import KeepAliveDaemon
import Logging
import ServiceLifecycle

/// `keepalive run`: the daemon.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Poll the configured devices until stopped (the daemon).",
        discussion: """
            Writes one JSON line per device per tick to the configuration's `output` (or --output). SIGTERM and \
            SIGINT end it gracefully: open windows end, every link is disconnected, the last records are written, \
            exit 0. Under systemd (Type=notify) it reports READY=1 after the first adapter check, pings the \
            watchdog at half of WatchdogSec, and reports STOPPING=1 on the way out.

            A lost bus (dbus-daemon restarted) is reconnected with backoff; meanwhile every tick is recorded as \
            failed (serviceUnavailable).

            Exit status: 0 stopped cleanly, 1 runtime failure (no bus at start, an output pipe whose reader is gone), \
            78 bad configuration.
            """
    )

    @Option(name: .long, help: ArgumentHelp("The YAML configuration file.", valueName: "path"))
    var config: String

    @OptionGroup var bus: BusOptions

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Where records go: a file (appended) or `-` for standard output. Overrides the file's `output`.",
            valueName: "path"))
    var output: String?

    @Flag(name: .long, help: "Check the configuration, print a summary and exit (0 valid, 78 not).")
    var check = false

    @Flag(
        name: .long,
        help: """
            For systemd's ExecCondition: exit 1 while the configuration names only simulated devices (C0:FF:EE:…, \
            as the example does), else 0. Starts nothing; a file that does not load exits 0, for `run` to report.
            """)
    var condition = false

    @Option(name: .long, help: ArgumentHelp("Poll every device this many ticks, then exit.", valueName: "n"))
    var ticks: UInt64?

    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        if let ticks, ticks == 0 { throw ValidationError("--ticks must be at least 1") }
    }

    func run() async throws {
        ignoreBrokenPipes()
        if condition {
            // Exit 1 (not 78): systemd then skips the start quietly, as a condition that does not hold, instead of
            // failing the unit; a file that does not load is `run`'s to report, with its place.
            guard let configuration = try? ConfigurationLoader.load(path: config),
                configuration.namesOnlySimulatedDevices
            else { return }
            let file = MessageText.escaped(config)
            writeOut(
                """
                keepalive: \(file) names only simulated devices \
                (\(DaemonConfiguration.simulatedAddressPrefix)…, as the example does): not starting. Put your \
                sensors' addresses in it, check it with `keepalive run --check --config \(file)`, then start the \
                service.

                """, to: 2)
            throw ExitCode(1)
        }
        var configuration = try loadConfiguration(config)
        if let output { configuration.output = output == "-" ? .standardOutput : .file(output) }
        if check {
            print(summary(configuration))
            return
        }
        if ticks != nil, !configuration.sharedDevices.isEmpty {
            throw ValidationError(
                """
                --ticks counts every device's ticks, but a shared device's ticks belong to whichever gateway \
                holds it: run a fleet without --ticks
                """
            )
        }
        let repeats = RepeatedWarnings()
        logging.bootstrap(repeats: repeats)
        let logger = Logger(label: "keepalive")
        let daemon: Daemon
        do {
            daemon = try Daemon(
                configuration: configuration,
                options: .init(bus: bus.resolved, maxTicks: ticks, repeatedWarnings: repeats), logger: logger)
        } catch let error as ConfigurationError {
            // A rule only the daemon could check: still the configuration's fault, so not a restart's to fix.
            logger.critical("\(error)")
            throw ExitCode(78)
        } catch {
            logger.critical("\(error)")
            throw ExitCode.failure
        }
        let signals = shutdownSignals()
        logger.info(
            "starting",
            metadata: [
                "config": "\(config)", "devices": "\(configuration.devices.count)",
                "interval": "\(configuration.interval.compact)", "output": "\(configuration.output)",
                "executors": "\(executorsInUse)",
            ]
        )
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: daemon, successTerminationBehavior: .gracefullyShutdownGroup)],
                logger: logger
            )
        )
        do {
            try await runUntilSignalled(group, signals: signals, logger: logger)
        } catch {
            logger.critical("\(error)")
            throw ExitCode.failure
        }
    }

    func summary(_ configuration: DaemonConfiguration) -> String {
        var lines = [
            "\(config): valid, \(configuration.devices.count) device\(configuration.devices.count == 1 ? "" : "s")"
        ]
        lines.append(
            "  interval \(configuration.interval.compact), jitter \(configuration.jitter.compact), "
                + """
                window budget \
                \(configuration.keepAliveConfiguration.budget(forInterval: configuration.interval).compact), 
                """
                + "max \(configuration.maxConnections) connections per adapter, output \(configuration.output)"
        )
        if let mqtt = configuration.mqtt {
            lines.append(
                """
                  mqtt \(mqtt.brokerDescription)\(mqtt.username.map { " as \($0)" } ?? ""): topics \
                \(mqtt.topicPrefix)/\(mqtt.gateway ?? "<host name>")/…, 
                """
                    + """
                    QoS \(mqtt.qos), Home Assistant discovery \
                    \(mqtt.discovery ? "on (\(mqtt.discoveryPrefix)/)" : "off"), 
                    """
                        + """
                        spool \(mqtt.spoolPath ?? "$STATE_DIRECTORY/spool, else /var/lib/keepalive/spool") \
                        (\(mqtt.spoolSize >> 20) MiB)
                        """
            )
        }
        if let fleet = configuration.fleetSummary { lines.append("  " + fleet) }
        let shared = Set(configuration.sharedDevices.map(\.name))
        for spec in configuration.peripheralSpecs() {
            var parts: [String] = []
            if !spec.reads.isEmpty { parts.append("read " + spec.reads.map(\.shortDescription).joined(separator: ",")) }
            if !spec.writes.isEmpty {
                parts.append("write " + spec.writes.map(\.characteristic.shortDescription).joined(separator: ","))
            }
            if !spec.notifications.isEmpty {
                parts.append(
                    "notify "
                        + spec.notifications.map { "\($0.characteristic.shortDescription) for \($0.duration.compact)" }
                        .joined(separator: ","))
            }
            if let advertising = spec.advertising {
                let format = advertising.format?.rawValue ?? "auto"
                let key = advertising.key == nil ? "" : ", with its key"
                parts.append(
                    spec.isPassive
                        ? "heard (\(format) advertisements\(key)), never connected to"
                        : "listened to (\(format)\(key))")
            }
            if spec.pollWhen == .heard { parts.append("connects only when heard") }
            let interval = spec.interval.map { " every \($0.compact)" } ?? ""
            let sharing = shared.contains(spec.name) ? " (shared)" : ""
            lines.append(
                """
                  \(spec.name) \(spec.peripheral.address) on \(spec.peripheral.adapter)\(interval)\(sharing): \
                \(parts.joined(separator: "; "))
                """
            )
        }
        // Names, paths and topics come from the file: an ESC sequence in one must not reach the terminal.
        return lines.map(MessageText.escaped).joined(separator: "\n")
    }
}

/// Loads a configuration file and checks the files `run` reads at start, or prints the error (file:line:column:
/// field: message) and exits 78: `run` and `run --check` refuse alike.
func loadConfiguration(_ path: String) throws -> DaemonConfiguration {
    do {
        let configuration = try ConfigurationLoader.load(path: path)
        try configuration.checkFiles()
        return configuration
    } catch {
        writeOut("keepalive: \(MessageText.escaped("\(error)"))\n", to: 2)
        throw ExitCode(78)
    }
}
