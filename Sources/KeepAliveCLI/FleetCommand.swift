import ArgumentParser
import KeepAliveDaemon
import Basics
import Logging
import MQTT

#if canImport(Glibc)
    import Glibc
#endif

/// `keepalive fleet`: every gateway of a fleet and every shared device, from the broker.
struct FleetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet",
        abstract: "Show the gateways sharing devices through a broker, and who holds each device.",
        discussion: """
            Reads the fleet's retained topics (gateways' status and description, each shared device's lease and \
            every gateway's reach report) and the records on the state topics. On a terminal the table is \
            redrawn every second until Ctrl-C; otherwise (or with --json) one snapshot is printed after --wait. \
            The broker, its user name and password file, TLS settings and the topic prefixes come from --config's \
            mqtt: and fleet: sections unless given.

            Exits 69 when the broker cannot be reached, does not answer or refuses the connection (a wrong \
            password, say), 78 when --config cannot be used.
            """
    )

    @Option(name: .long, help: "The broker: mqtt://host:port (default: the configuration's).")
    var broker: String?

    @Option(name: .long, help: "A configuration file to take the broker, its credentials and the prefixes from.")
    var config: String?

    @Option(name: .long, help: "The fleet's topic prefix (default: the configuration's, else keepalive/fleet).")
    var prefix: String?

    @Option(name: .long, help: "How long to collect before a snapshot.")
    var wait = DurationArgument(.seconds(2))

    @Flag(name: .long, help: "One JSON snapshot even on a terminal.")
    var json = false

    @OptionGroup var logging: LoggingOptions

    /// The exit status when the broker cannot be reached or refuses the connection (EX_UNAVAILABLE).
    static let brokerUnavailable: Int32 = 69

    func run() async throws {
        ignoreBrokenPipes()
        logging.bootstrap()
        var host = "127.0.0.1"
        var port = 1883
        var statePrefix = "keepalive"
        var fleetPrefix = prefix ?? "keepalive/fleet"
        var tls: MQTTConfiguration.TLS?
        var credentials: MQTTConfiguration.Credentials?
        if let config {
            // As `run` loads it (a file it cannot use exits 78), and with the daemon's credentials: a broker that
            // wants a password refuses a viewer without one.
            let configuration = try loadConfiguration(config)
            if let mqtt = configuration.mqtt {
                host = mqtt.host
                port = mqtt.port
                statePrefix = mqtt.topicPrefix
                tls = mqtt.tlsSettings
                do {
                    credentials = try mqtt.credentials(logger: Logger(label: "keepalive"))
                } catch {
                    writeOut("keepalive: \(config): mqtt.password_file: \(error)\n", to: STDERR_FILENO)
                    throw ExitCode(78)
                }
            }
            if prefix == nil, let fleet = configuration.fleet { fleetPrefix = fleet.topicPrefix }
        }
        if let broker {
            let parsed = try ConfigurationLoader.parse(
                "mqtt: {broker: \"\(broker)\"}\ndevices: [{name: a, address: C0:FF:EE:00:00:01, read: [2a19]}]\n",
                file: "--broker")
            guard let mqtt = parsed.mqtt else { throw ValidationError("--broker: not a broker address") }
            host = mqtt.host
            port = mqtt.port
            // The configuration's CA and client certificate still apply to a broker given here.
            tls = mqtt.scheme == .tls ? tls ?? MQTTConfiguration.TLS.systemTrustStore : nil
        }
        var random = SystemRandomNumberGenerator()
        let client = try MQTTClient(
            configuration: MQTTConfiguration(
                host: host, port: port, clientID: "keepalive-fleet-view-\(random.next() % 1_000_000)", cleanStart: true,
                sessionExpiryInterval: 0, credentials: credentials, tls: tls, threadName: "fleet-view"))
        let view = Locked(FleetView(topicPrefix: fleetPrefix, statePrefix: statePrefix))
        let messages = client.messages
        let reader = Task {
            for await message in messages {
                view.withLock { $0.receive(topic: message.topic, payload: message.payload) }
            }
        }
        defer { reader.cancel() }
        do {
            try await client.connect()
        } catch {
            // Not bad usage (64): the broker is away, silent or refuses us. sysexits(3)'s EX_UNAVAILABLE.
            writeOut("keepalive: cannot connect to the MQTT broker: \(error)\n", to: STDERR_FILENO)
            await client.close()
            throw ExitCode(Self.brokerUnavailable)
        }
        for filter in view.withLock({ $0.filters }) { try await client.subscribe(filter) }
        let live = standardOutputIsTerminal && !json
        if live {
            _ = try await untilInterrupted {
                while !Task.isCancelled {
                    writeOut("\u{1B}[H\u{1B}[2J" + view.withLock { $0.table })
                    try await Task.sleep(for: .seconds(1))
                }
            }
        } else {
            try await Task.sleep(for: wait.duration)
            writeOut(view.withLock { $0.json } + "\n")
        }
        await client.close()
    }
}
