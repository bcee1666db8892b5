import ArgumentParser
import BlueZSimulator
import DBus
import LocalServices
import KeepAlive
import Polling
import KeepAliveDaemon
import Logging
import ServiceLifecycle

/// `keepalive demo`: the whole daemon on a simulated BlueZ, on a private bus. No hardware, no root.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the daemon against simulated sensors on a private bus (no hardware, no root).",
        discussion: """
            Starts a private dbus-daemon, a simulated bluetoothd with the example configuration's sensors, and \
            the daemon with the embedded example configuration (`keepalive.yaml` in the repository), its \
            intervals scaled down so something happens every few seconds. Halfway through the first minute one \
            sensor starts failing its reads for a while, to show how failures, retries and backoff are reported. \
            Ctrl-C ends it cleanly.
            """
    )

    @Option(
        name: .long,
        help:
            "The demo's base interval (the example file's 30 s is scaled to this; per-device intervals in proportion).")
    var interval = DurationArgument(.seconds(8))

    @Option(name: .long, help: ArgumentHelp("Stop after this long (default: until Ctrl-C).", valueName: "duration"))
    var duration: DurationArgument?

    @Flag(name: .long, help: "Print the JSON lines `run` would write instead of the friendly view.")
    var json = false

    @Flag(name: .long, help: "Keep the sensors healthy (no injected failure).")
    var noFault = false

    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        // Below this the example's 1-s notification listening and BlueZ's 2-s disconnect no longer fit a window.
        guard interval.duration >= .seconds(4) else { throw ValidationError("--interval must be at least 4s") }
    }

    func run() async throws {
        ignoreBrokenPipes()
        var logging = self.logging
        if logging.logLevel.level == .info { logging.logLevel = LogLevelArgument(.error) }  // the view says it all
        logging.bootstrap()
        let logger = Logger(label: "keepalive.demo")

        var configuration = try ConfigurationLoader.parse(ExampleConfiguration.yaml, file: "keepalive.yaml (embedded)")
        configuration = Self.scaled(configuration, to: interval.duration)
        if json { configuration.output = .standardOutput }

        let bus = try PrivateBus.start()
        defer { bus.stop() }
        // The bridge too: a private mosquitto on a free loopback port (Debian's `mosquitto`, which `make deps`
        // installs); without it the demo runs as before and says why. It runs in a process group of its own: the
        // terminal sends Ctrl-C's SIGINT to its whole foreground group, and a broker in ours quit at once, while the
        // daemon was still ending its windows, so their records stayed in the spool (issue #35: "4 left in the
        // spool"). Now only the demo gets the signal; the daemon's bridge drains the spool to the broker as it
        // shuts down (`Daemon.drain(_:within:)`), and the demo removes the broker after that, last but the bus.
        var broker: MosquittoBroker?
        var mqttProblem: String?
        if !json {
            do {
                let started = try await MosquittoBroker.start(ownProcessGroup: true)
                broker = started
                configuration.mqtt = DaemonConfiguration.MQTT(
                    host: "127.0.0.1", port: started.port, gateway: "demo", spoolPath: started.directory + "/spool"
                )
            } catch {
                mqttProblem = "\(error)"
            }
        }
        defer { broker?.remove() }
        // The example's first five devices are the simulator's plain sensors, then its profile sensors, then two
        // of its advertising sensors (passive: heard, never connected to).
        let plainSensors = configuration.devices.filter { $0.profile == nil && $0.advertising == nil }.count
        var simulatorConfiguration = BlueZSimulator.Configuration(
            adapters: ["hci0"],
            devices: .sensors(count: plainSensors) + .profileSensors(adapter: "hci0")
                + .advertisingSensors(adapter: "hci0")
        )
        simulatorConfiguration.controlName = BlueZSimulator.controlName
        let simulator = try await BlueZSimulator.start(
            on: .address(bus.address), configuration: simulatorConfiguration, logger: logger)

        let view = DemoView(configuration: configuration)
        if !json { writeOut(view.banner(busAddress: bus.address)) }
        if let mqttProblem, !json { writeOut("  mqtt       not shown: no private mosquitto (\(mqttProblem))\n\n") }
        var show: (@Sendable (PollRecord) -> Void)?
        if !json { show = { @Sendable record in writeOut(view.render(record)) } }
        var options = Daemon.Options(bus: .address(bus.address), notifier: nil, writesRecords: json, onRecord: show)
        // The demo owns its broker and no unit bounds its stop: Ctrl-C may wait for every record's acknowledgement.
        options.drainBound = .seconds(10)
        let daemon = try Daemon(configuration: configuration, options: options, logger: logger)
        if let bridge = daemon.bridge {
            view.bridgeSummary.withLock { summary in
                summary = {
                    """
                        mqtt \(bridge.statistics.delivered) \
                        delivered\(bridge.statistics.pending > 0 ? ", \(bridge.statistics.pending) spooled" : "")
                        """
                }
            }
        }
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: daemon, successTerminationBehavior: .gracefullyShutdownGroup)
        ]
        if !noFault, let victim = configuration.devices.dropFirst(2).first {
            services.append(
                .init(
                    service: FaultScript(
                        simulator: simulator, device: victim, interval: configuration.interval, logger: logger)))
        }
        if let duration {
            services.append(
                .init(
                    service: StopAfter(duration: duration.duration),
                    successTerminationBehavior: .gracefullyShutdownGroup))
        }
        let signals = shutdownSignals()
        let group = ServiceGroup(configuration: .init(services: services, logger: logger))
        do {
            try await runUntilSignalled(group, signals: signals, logger: logger)
        } catch {
            await simulator.stop()
            throw CommandFailure("demo failed: \(error)")
        }
        let stillConnected = simulator.connectedDevices
        await simulator.stop()
        if !json {
            writeOut(
                view.footer(
                    statistics: daemon.keepAlive.statistics, openWindows: daemon.keepAlive.ledger.openCount,
                    linksUp: stillConnected.count))
            if let bridge = daemon.bridge, let mqtt = configuration.mqtt {
                let statistics = bridge.statistics
                writeOut(
                    """
                        mqtt: \(statistics.delivered) records delivered to \(mqtt.brokerDescription), \
                        \(statistics.pending) left in the spool\n
                        """
                )
            }
        }
    }

    /// The example's intervals and budgets, scaled so its base interval becomes `interval`; no jitter (so the
    /// ticks line up on screen).
    ///
    /// Radio latencies do not scale (BlueZ takes ~2 s to disconnect), so no interval goes below `interval` and
    /// windows keep the core's default budget (two thirds of the interval).
    static func scaled(_ configuration: DaemonConfiguration, to interval: Duration) -> DaemonConfiguration {
        var scaled = configuration
        let ratio = interval / configuration.interval
        scaled.interval = interval
        // The floor (`min_interval`) scales too, never above the base interval: what the file allows, the demo does.
        scaled.minInterval = min(configuration.minInterval * ratio, interval)
        scaled.jitter = .zero
        scaled.windowBudget = nil
        scaled.devices = configuration.devices.map { device in
            var device = device
            device.interval = device.interval.map { max($0 * ratio, interval) }
            device.minInterval = device.minInterval.map { min($0 * ratio, interval) }
            device.budget = nil
            // Listening shrinks with the interval (never below a second, the sensors' notification period),
            // so it still fits the scaled window.
            device.notifications = device.notifications.map { subscription in
                var subscription = subscription
                subscription.duration = max(subscription.duration * ratio, .seconds(1))
                return subscription
            }
            return device
        }
        return scaled
    }
}

/// Makes one sensor fail its reads for a while (ATT error 0x0e), then heals it: failures, backoff and recovery
/// as a gateway operator would see them.
struct FaultScript: Service {
    let simulator: BlueZSimulator
    let device: DaemonConfiguration.Device
    let interval: Duration
    let logger: Logger

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                try await Task.sleep(for: interval * 2 + interval / 2)
                try await simulator.inject(.attError(0x0e), device: device.address)
                try await Task.sleep(for: interval * 4)
                try simulator.clearFault("att-error", device: device.address)
                try await Task.sleep(for: .seconds(100 * 365 * 86_400))
            }
        } catch is CancellationError {
            // The demo is ending.
        }
    }
}

/// Ends the group after `duration`.
struct StopAfter: Service {
    let duration: Duration
    func run() async throws {
        try? await cancelWhenGracefulShutdown { try await Task.sleep(for: duration) }
    }
}
