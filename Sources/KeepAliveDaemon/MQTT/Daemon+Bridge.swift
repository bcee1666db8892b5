import KeepAlive
import Polling
import Basics
package import Logging
package import MQTT
import MQTTBridge
import Readings
import CoreMetrics

#if canImport(Glibc)
    import Glibc
#endif

extension DaemonConfiguration.MQTT {
    /// Where the spool goes when the configuration does not say: `spool` in systemd's `StateDirectory=`
    /// (`$STATE_DIRECTORY`), else /var/lib/keepalive/spool.
    static func defaultSpoolDirectory() -> String {
        DaemonConfiguration.defaultStateDirectory() + "/spool"
    }

    /// The user name and its password, read from `password_file` now (a file others can read is warned about, and
    /// the password itself never logged); nil without `username`. One place for the bridge, the fleet's connection
    /// and `keepalive fleet`, so that all of them present the broker the same credentials.
    ///
    /// - Throws: `.systemCall` when the password file cannot be read.
    package func credentials(logger: Logger) throws(MQTTError) -> MQTTConfiguration.Credentials? {
        guard let username else { return nil }
        var password: String?
        if let passwordFile {
            let read = try MQTTClient.readPassword(from: passwordFile)
            password = read.password
            if read.worldReadable {
                logger.warning(
                    "the MQTT password file can be read by every user of this machine: chmod 600 it",
                    metadata: ["file": "\(passwordFile)"]
                )
            }
        }
        return .init(user: username, password: password)
    }

    /// The TLS settings of `mqtts://` (the configured CA file, else the system's store, and a client certificate
    /// when one is configured); nil for `mqtt://`.
    package var tlsSettings: MQTTConfiguration.TLS? {
        guard scheme == .tls else { return nil }
        return MQTTConfiguration.TLS(caFile: caFile, certificateFile: certificateFile, keyFile: keyFile)
    }

    /// The bridge's settings, the password read from its file now (``credentials(logger:)``).
    /// `metricsFactory`: the daemon's metrics (`metrics:`), `nil` for none.
    func bridgeConfiguration(logger: Logger, metricsFactory: (any MetricsFactory)? = nil) throws
        -> BridgeConfiguration
    {
        let mqtt = MQTTConfiguration(
            host: host, port: port, clientID: clientID ?? "", credentials: try credentials(logger: logger),
            tls: tlsSettings)
        var configuration = BridgeConfiguration(
            mqtt: mqtt, topicPrefix: topicPrefix, gateway: gateway, qos: MQTTQoS(rawValue: UInt8(qos)) ?? .atLeastOnce,
            discovery: discovery, discoveryPrefix: discoveryPrefix,
            spoolDirectory: spoolPath ?? Self.defaultSpoolDirectory(),
            spoolLimitBytes: spoolSize, availabilityThreshold: offlineAfter
        )
        configuration.metricsFactory = metricsFactory ?? NOOPMetricsHandler.instance
        return configuration
    }
}

extension DaemonConfiguration {
    /// One bridge device per configured device, with the readings its profile or fields promise (announced to
    /// Home Assistant before the first poll; others are announced when they first appear).
    var bridgeDevices: [BridgeDevice] {
        devices.map { device in
            var seen = Set<BluetoothUUID>()
            let expected = (device.reads + device.notifications.map(\.characteristic)).filter {
                seen.insert($0).inserted
            }.flatMap { uuid in
                let textFields = Set(
                    device.decoding[uuid]?.layout?.fields.filter { !$0.format.isNumeric }.map(\.name) ?? [])
                return DeviceProfile.expectedReadings(of: uuid, decoding: device.decoding[uuid]).map { reading in
                    BridgeDevice.ExpectedReading(
                        name: reading.name, unit: reading.unit, isText: textFields.contains(reading.name))
                }
            }
            return BridgeDevice(
                name: device.name, address: device.address, manufacturer: device.manufacturer, model: device.model,
                interval: device.interval ?? interval, minimumInterval: minInterval(of: device),
                expectedReadings: expected, shared: device.shared && fleet != nil,
                passive: device.advertising != nil && device.reads.isEmpty && device.writes.isEmpty
                    && device.notifications.isEmpty
            )
        }
    }
}

extension Daemon {
    /// Carries out the bridge's commands: poll now, a new interval (echoed with the value in force).
    ///
    /// Polls go through a ``CommandPollLimiter`` first, keyed by device with its floor from `floors` (devices
    /// missing there get the configuration's default): one pending at most, and one per floor; the others are
    /// answered on the device's error topic by the bridge (limited, and folded in the log) and cost no task and no
    /// line of their own. `now` is a monotonic clock (tests may pass their own).
    static func followCommands(
        of bridge: MQTTBridge, engine: PollEngine, floors: [String: Duration],
        limiter: Locked<CommandPollLimiter> = Locked(CommandPollLimiter()), logger: Logger,
        now: @escaping @Sendable () -> Duration = { .nanoseconds(clockNanoseconds(CLOCK_MONOTONIC)) }
    ) async {
        await withDiscardingTaskGroup { group in
            for await command in bridge.commands {
                switch command {
                case .pollNow(let device):
                    let floor = floors[device] ?? DaemonConfiguration.defaultMinInterval
                    let decision = limiter.withLock { $0.admit(device, floor: floor, at: now()) }
                    guard decision == .poll else {
                        bridge.refuse(command, kind: decision.kind, reason: decision.reason)
                        continue
                    }
                    logger.info("poll on command", metadata: ["device": "\(device)"])
                    group.addTask {
                        var polled = false
                        defer { limiter.withLock { $0.finished(device, polled: polled, at: now()) } }
                        do {
                            _ = try await engine.pollNow(device)
                            polled = true
                        } catch {
                            logger.warning(
                                "a poll on command was refused", metadata: ["device": "\(device)", "error": "\(error)"])
                        }
                    }
                case .setInterval(let device, let interval):
                    do {
                        let effective = try engine.setInterval(interval, forDevice: device)
                        logger.notice(
                            "interval changed on command",
                            metadata: ["device": "\(device)", "interval": "\(interval.compact)"])
                        bridge.intervalChanged(device: device, to: effective ?? interval)
                    } catch {
                        logger.warning(
                            "an interval command was refused", metadata: ["device": "\(device)", "error": "\(error)"])
                    }
                }
            }
        }
    }
}

extension Daemon {
    /// The fleet's binding for a configuration with `fleet:`, on the bridge's broker (same credentials and TLS,
    /// a connection of its own), named like the bridge's gateway; nil without `fleet:`.
    static func fleetBinding(
        _ configuration: DaemonConfiguration, bridge: BridgeConfiguration, announcer: MQTTBridge, logger: Logger
    ) throws -> FleetBinding? {
        guard let fleet = configuration.fleet else { return nil }
        var random = SystemRandomNumberGenerator()
        guard
            let fleetConfiguration = configuration.fleetConfiguration(
                gateway: bridge.gateway, incarnation: random.next(), version: KeepAliveVersion.current)
        else { return nil }
        if let problem = fleetConfiguration.problems.first {
            throw DaemonError(description: "fleet: \(problem)")
        }
        return try FleetBinding(
            configuration: fleetConfiguration, mqtt: bridge.mqtt,
            shared: configuration.sharedDevices.map { ($0.name, $0.address) },
            scan: (fleet.scanEvery, fleet.scanFor), logger: logger,
            onHoldChange: { device, holding in announcer.holdChanged(device: device, holding: holding) },
            metricsFactory: bridge.metricsFactory
        )
    }
}
