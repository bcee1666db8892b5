internal import BlueZ
public import HostPower
public import MQTTBridge
import MQTT
public import DBus
public import KeepAlive
internal import LibCrypto
public import Polling
public import Logging
public import ServiceLifecycle
internal import Basics

#if canImport(Glibc)
    internal import Glibc
#endif

/// `keepalive run`: a configuration's devices polled through BlueZ on a bus, each record written as a JSON
/// line, systemd told how it goes. A `Service`: run it in a `ServiceGroup`, whose graceful shutdown (SIGTERM)
/// ends the open windows, disconnects every link, writes the last records and returns.
///
/// ```swift
/// let daemon = try Daemon(configuration: configuration, options: .init(), logger: logger)
/// let group = ServiceGroup(services: [daemon], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
/// try await group.run()
/// ```
public final class Daemon: Service {
    public struct Options: Sendable {
        /// Where BlueZ is.
        public var bus: DBusConnection.Bus
        /// Poll every device this many ticks, then return (`nil`: until shut down).
        public var maxTicks: UInt64?
        /// How long to wait for org.bluez before starting anyway (its polls then fail, and say why, until
        /// bluetoothd appears).
        public var bluezTimeout: Duration
        /// `Type=notify` under systemd.
        public var notifier: SystemdNotifier?
        /// The host's power, when not from the configuration's `low_power.mode` (tests, embedding apps).
        public var powerSource: (any PowerSource)?
        /// Where `auto` looks for batteries and mains when UPower is absent.
        public var powerSupplyDirectory: String
        /// Write JSON Lines to the configuration's output (the demo shows records its own way instead).
        public var writesRecords: Bool
        /// Sees every record (after it is written).
        public var onRecord: (@Sendable (PollRecord) -> Void)?
        /// Hold a logind sleep inhibitor and put the work away before the host sleeps (when logind is there).
        public var followsSleep: Bool
        /// The log's flood guard, when the log handler has one: a device's summary goes out when it works again.
        public var repeatedWarnings: RepeatedWarnings?
        /// How long the MQTT bridge may take at shutdown to deliver what is still spooled while connected (default
        /// 3 s: the shipped unit's `TimeoutStopSec=10s` must also cover the windows' ends). The demo, which owns its
        /// broker and has no such limit, gives it more: on a loaded host 3 s left records unacknowledged.
        public var drainBound: Duration = .seconds(3)

        public init(
            bus: DBusConnection.Bus = .system,
            maxTicks: UInt64? = nil,
            bluezTimeout: Duration = .seconds(10),
            notifier: SystemdNotifier? = SystemdNotifier.fromEnvironment(),
            powerSource: (any PowerSource)? = nil,
            powerSupplyDirectory: String = "/sys/class/power_supply",
            writesRecords: Bool = true,
            onRecord: (@Sendable (PollRecord) -> Void)? = nil,
            followsSleep: Bool = true,
            repeatedWarnings: RepeatedWarnings? = nil
        ) {
            self.followsSleep = followsSleep
            self.repeatedWarnings = repeatedWarnings
            self.bus = bus
            self.maxTicks = maxTicks
            self.bluezTimeout = bluezTimeout
            self.notifier = notifier
            self.powerSource = powerSource
            self.powerSupplyDirectory = powerSupplyDirectory
            self.writesRecords = writesRecords
            self.onRecord = onRecord
        }
    }

    /// Why the daemon stopped with an error.
    public struct DaemonError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    public let configuration: DaemonConfiguration
    public let options: Options
    /// The scheduler: subscribe to its `events()` and its ledger's for a live view.
    public let keepAlive: KeepAlive
    /// Numbers every record and hands it to the sinks: the JSON Lines output (unless ``Options/writesRecords`` is
    /// off or the output is `none`) and the MQTT bridge.
    public let sequencer: RecordSequencer
    /// The JSON Lines output, closed at the end of ``run()``.
    private let output: JSONLinesSink?
    /// The MQTT bridge, when the configuration has `mqtt:`; it runs with the daemon.
    public let bridge: MQTTBridge?
    /// The fleet's binding, when the configuration has `fleet:`: shared devices are polled only while held.
    let fleet: FleetBinding?
    /// The metrics, when the configuration has `metrics:` (Daemon+Metrics.swift).
    let metrics: DaemonMetrics?
    /// The operator's override (SIGUSR1: low power; SIGUSR2: back to the configured mode). Wins over the host.
    public let powerOverride = ManualPowerSource()
    /// What the scheduler sees: the host's combined power, relayed once `run()` has found the sources.
    private let powerRelay = ManualPowerSource()
    let logger: Logger
    private let progress: Locked<Progress>
    /// What `STATUS=` says (``status``); the watchdog and the healing ladder change it.
    let statusBoard = StatusBoard(DaemonStatus(polling: "starting"))
    /// Each device's state and recent decisions, for the control interface (`keepalive status`, `explain`).
    let board: DeviceBoard
    /// The polls asked for by commands, from MQTT and from the control interface alike: one pending per device,
    /// and one per its floor.
    let commandPolls = Locked(CommandPollLimiter())
    /// Where the control interface's signals go while it is exported (``runControl(on:engine:)``).
    let controlSignals = Locked<AsyncStream<ControlSignal>.Continuation?>(nil)

    private struct Progress {
        var recordsPerDevice: [String: UInt64] = [:]
        var finished = false
        var failure: (any Error)?
        /// The scheduler's task, once started; `stopping` is set by whoever ends the daemon first (SIGTERM,
        /// `--ticks` done, the bus lost, the output broken), before or after the scheduler started.
        var scheduler: Task<Void, Never>?
        var stopping = false
    }

    /// Ends the scheduler now, or keeps it from starting: cancelling `run()` ends the open windows, waits for
    /// their reports and returns (unlike `KeepAlive.stop()`, this also holds before the scheduler runs).
    private static func stopScheduler(_ progress: Locked<Progress>) {
        progress.withLock { progress in
            progress.stopping = true
            return progress.scheduler
        }?.cancel()
    }

    /// Checks the configuration (``DaemonConfiguration/validate()``) and opens the output, so a bad value or
    /// path fails before anything starts.
    public init(configuration: DaemonConfiguration, options: Options = Options(), logger: Logger) throws {
        try configuration.validate()
        if options.maxTicks != nil, !configuration.sharedDevices.isEmpty {
            throw DaemonError(
                description:
                    """
                    maxTicks counts every device's ticks, but a shared device's ticks belong to whichever gateway \
                    holds it
                    """
            )
        }
        self.configuration = configuration
        self.options = options
        self.logger = logger
        self.progress = Locked(Progress())
        self.keepAlive = try KeepAlive(
            configuration: configuration.keepAliveConfiguration,
            powerSource: options.powerSource ?? powerRelay,
            logger: logger
        )
        board = Self.deviceBoard(configuration, keepAlive: keepAlive, status: statusBoard)
        statusBoard.observe { [controlSignals] status in _ = controlSignals.withLock { $0 }?.yield(.health(status)) }
        metrics = try Self.makeMetrics(configuration, logger: logger)
        if let mqtt = configuration.mqtt {
            do {
                var bridgeConfiguration = try mqtt.bridgeConfiguration(
                    logger: logger, metricsFactory: metrics?.registry)
                bridgeConfiguration.shutdownDrainBound = options.drainBound
                // libmosquitto is loaded only with `mqtt:`: missing, it stops the start, not the bridge later.
                try MQTTClient.loadLibrary()
                let created = try MQTTBridge(
                    configuration: bridgeConfiguration, devices: configuration.bridgeDevices, logger: logger)
                bridge = created
                // The daemon's health (STATUS=) on `<prefix>/<gateway>/health` too.
                statusBoard.observe { status in created.healthChanged(status.text) }
                fleet = try Self.fleetBinding(
                    configuration, bridge: bridgeConfiguration, announcer: created, logger: logger)
            } catch {
                throw DaemonError(description: "MQTT bridge to \(mqtt.brokerDescription): \(error)")
            }
        } else {
            bridge = nil
            fleet = nil
        }
        // The spool first: a line in the output is then always in the spool too (RecordSequencer).
        var sinks: [any RecordSink] = []
        if let bridge {
            sinks.append(
                MQTTRecordSink(
                    bridge, configuration: configuration, status: statusBoard, notifier: options.notifier,
                    logger: logger))
        }
        if options.writesRecords, configuration.output != .none {
            let output = try JSONLinesSink(
                output: configuration.output,
                onReopen: { [logger, configuration] why in
                    logger.notice("\(why)", metadata: ["output": "\(configuration.output)"])
                },
                reporter: SinkTrouble.Reporter(
                    sink: "the output file", status: statusBoard, notifier: options.notifier, logger: logger))
            sinks.append(output)
            self.output = output
        } else {
            self.output = nil
        }
        if let textfile = metrics?.textfile { sinks.append(textfile) }
        // Last: a `Record` signal follows the line in the output.
        sinks.append(board)
        let progress = self.progress
        sequencer = RecordSequencer(sinks: sinks) { error in
            logger.critical("output failed, stopping: \(error)")
            progress.withLock { $0.failure = error }
            Self.stopScheduler(progress)
        }
    }

    public func run() async throws {
        let connection: DBusConnection
        do {
            connection = try await DBusConnection(bus: options.bus, timeout: .seconds(5))
        } catch {
            throw DaemonError(description: "cannot connect to \(options.bus): \(error)")
        }
        let transport = ReconnectingTransport()
        var engineConfiguration = configuration.pollEngineConfiguration
        engineConfiguration.maxTicks = options.maxTicks
        engineConfiguration.metricsFactory = metricsFactory
        // Records are written on the D-Bus connection's thread, where the poll ended, only when nothing in
        // `onRecord` can wait: a regular file or no output, no MQTT spool (it may `fdatasync` each record), no
        // caller's callback. Else each record costs a task and a thread switch, but never stalls the polls.
        engineConfiguration.recordsOnTransportExecutor = sequencer.neverBlocks && options.onRecord == nil
        let specs = configuration.peripheralSpecs()
        // libcrypto is loaded only when a device has a key, and only at its first encrypted advertisement.
        if specs.contains(where: { $0.advertising?.key != nil }) {
            engineConfiguration.advertisementCipher = LibCryptoAESCCM()
        }
        let healer = makeHealer(specs: specs, transport: transport)
        let engine = try PollEngine(
            peripherals: specs,
            transport: transport,
            keepAlive: keepAlive,
            configuration: engineConfiguration,
            logger: logger,
            admission: ControlAdmission(board: board, fleet: fleet),
            onRecord: { [sequencer, options, progress, fleet] record in
                sequencer.submit(record, healing: healer?.note(for: record.device))
                fleet?.pollCompleted(record)
                healer?.observe(record)
                if record.result != .failed { options.repeatedWarnings?.flush(device: record.device) }
                options.onRecord?(record)
                guard let maxTicks = options.maxTicks else { return }
                let done = progress.withLock { progress in
                    progress.recordsPerDevice[record.device, default: 0] += 1
                    guard !progress.finished, progress.recordsPerDevice.count == specs.count,
                        progress.recordsPerDevice.values.allSatisfy({ $0 >= maxTicks })
                    else { return false }
                    progress.finished = true
                    return true
                }
                if done { Self.stopScheduler(progress) }
            }
        )
        defer { engine.detach() }
        board.follow { [engine] in engine.schedule(of: $0) }
        // The first connection's BlueZ is checked before READY=1; later ones after each reconnect.
        let firstSession = BlueZTransport(connection: connection, logger: logger)
        transport.attach(firstSession)
        let ready = Promise<Void>()
        try await startMetricsEndpoint(closingOnFailure: connection)

        // What runs, in the order it starts. A graceful shutdown (SIGTERM, `--ticks` done, the output broken) stops
        // them in the reverse order, each after the one below it has finished: the scheduler ends its windows and
        // waits for every disconnect; then the watchdog, the override signals, the deferred tasks (their windows
        // ended with the scheduler's: they wait for the next start) and the bus go; the fleet releases
        // its leases after the last poll; the bridge delivers the last records before `offline`; the metrics write
        // their last textfile.
        let parts: [DaemonService?] = [
            metrics.map { metrics in DaemonService("metrics") { await self.runMetrics(metrics) } },
            bridge.map { bridge in DaemonService("MQTT bridge") { await self.runBridge(bridge, engine: engine) } },
            fleet.map { fleet in
                DaemonService("fleet") { await cancelWhenGracefulShutdown { await fleet.run(transport: transport) } }
            },
            DaemonService("bus sessions") {
                await cancelWhenGracefulShutdown {
                    await self.runSessions(
                        first: connection, firstTransport: firstSession, transport: transport, engine: engine)
                }
            },
            hasDeferredWork
                ? DaemonService("deferred tasks") { await self.runDeferred(engine: engine, after: ready) } : nil,
            DaemonService("SIGHUP: reopen the output") { [output, logger] in
                await cancelWhenGracefulShutdown { await Self.reopenOnHangUp(output, logger: logger) }
            },
            options.powerSource == nil
                ? DaemonService("power override signals") { [powerOverride, logger] in
                    await cancelWhenGracefulShutdown { await Self.followOverrideSignals(powerOverride, logger: logger) }
                }
                : nil,
            DaemonService("watchdog") { await self.runWatchdog(after: ready) },
        ]
        let scheduler = DaemonService("scheduler", endsGroup: true) {
            await self.runScheduler(engine: engine, firstSession: firstSession, devices: specs.count, ready: ready)
        }
        // The scheduler's end (`--ticks` done, the output broken, a shutdown) shuts the rest down; the other parts
        // stay until the shutdown reaches them (DaemonService).
        let services =
            parts.compactMap { $0 }.map {
                ServiceGroupConfiguration.ServiceConfiguration(service: $0, successTerminationBehavior: .ignore)
            }
            + [.init(service: scheduler, successTerminationBehavior: .gracefullyShutdownGroup)]
        let group = ServiceGroup(
            configuration: .init(services: services, logger: logger))
        do {
            // Inside the caller's service group this inherits its graceful shutdown (SIGTERM).
            try await group.run()
        } catch {
            progress.withLock { $0.failure = $0.failure ?? error }
        }
        output?.close()
        options.repeatedWarnings?.flushAll()
        let stats = keepAlive.statistics
        logger.info(
            "stopped",
            metadata: [
                "records": "\(sequencer.written)", "polls": "\(stats.callbacksRun)", "failures": "\(stats.failures)",
                "skipped": "\(stats.skippedBackoff + stats.skippedOverlap + stats.refused)",
                "openWindows": "\(keepAlive.ledger.openCount)",
            ]
        )
        if let failure = progress.withLock({ $0.failure }) {
            throw DaemonError(description: "\(failure)")
        }
    }

    // MARK: Services

    /// The scheduler: waits for org.bluez (at most `bluezTimeout`, and never past a shutdown), says READY=1, polls
    /// until stopped, then waits for every disconnect an expired window left running (each is bounded), so no
    /// link outlives the daemon.
    private func runScheduler(engine: PollEngine, firstSession: BlueZTransport, devices: Int, ready: Promise<Void>)
        async
    {
        await cancelWhenGracefulShutdown { await self.checkBlueZ(firstSession) }
        let statusText = statusBoard.withLock { status in
            status.polling =
                "polling \(devices) device\(devices == 1 ? "" : "s") every \(configuration.interval.compact)"
            return status.text
        }
        options.notifier?.notify("READY=1\nSTATUS=\(statusText)")
        ready.succeed()
        let keepAlive = self.keepAlive
        let shared = progress
        let scheduler: Task<Void, Never>? = progress.withLock { state -> Task<Void, Never>? in
            guard !state.stopping else { return nil }
            let task = Task {
                do {
                    try await keepAlive.run()
                } catch {
                    shared.withLock { $0.failure = error }
                }
            }
            state.scheduler = task
            return task
        }
        await withGracefulShutdownHandler {
            await scheduler?.value
        } onGracefulShutdown: { [options, logger, progress] in
            logger.info("shutting down: ending open windows and disconnecting")
            options.notifier?.notify("STOPPING=1")
            Self.stopScheduler(progress)
        }
        engine.stopListening()
        await engine.waitUntilDisconnected()
    }

    /// WATCHDOG=1 while the scheduler keeps up, from READY=1 until the scheduler has stopped.
    private func runWatchdog(after ready: Promise<Void>) async {
        let started = await cancelWhenGracefulShutdown { (try? await ready.value()) != nil }
        guard started, let watchdog = startWatchdog(status: statusBoard) else { return }
        try? await gracefulShutdown()
        watchdog.stop()
    }

    /// The bridge and its commands, beside the polling; at shutdown (after the scheduler, the bus and the fleet)
    /// the bridge gets up to `options.drainBound` (3 s) to deliver what is still spooled while connected, then
    /// says `offline` and closes (``MQTTBridge/run()``); the commands end with it.
    private func runBridge(_ bridge: MQTTBridge, engine: PollEngine) async {
        let floors = Dictionary(
            configuration.devices.map { ($0.name, configuration.minInterval(of: $0)) }, uniquingKeysWith: { $1 })
        await withTaskGroup(of: Void.self) { [logger] group in
            group.addTask { [commandPolls] in
                await Self.followCommands(
                    of: bridge, engine: engine, floors: floors, limiter: commandPolls, logger: logger)
            }
            do {
                try await bridge.run()
            } catch is CancellationError {
            } catch {
                logger.error("the MQTT bridge stopped: \(error)")
            }
            group.cancelAll()
        }
    }

    /// The first adapter check: logs what it finds; polling starts whatever the outcome (and each poll's
    /// record says why it failed), so a gateway whose adapter comes later recovers by itself.
    private func checkBlueZ(_ transport: BlueZTransport) async {
        do {
            try await transport.waitUntilReady(timeout: options.bluezTimeout)
        } catch is CancellationError {
            return  // shutting down
        } catch {
            logger.error(
                """
                org.bluez is not on \(options.bus) after \(options.bluezTimeout.compact): polls fail until \
                bluetoothd runs (try `systemctl start bluetooth`, `keepalive doctor`)
                """
            )
            return
        }
        for name in configuration.adapters {
            do {
                let adapter = try transport.checkAdapter(name)
                logger.info("adapter ready", metadata: ["adapter": "\(name)", "address": "\(adapter.address ?? "?")"])
            } catch {
                logger.error("adapter \(name) not usable: \(error)")
            }
        }
    }

    // MARK: Bus sessions

    /// One connection after another until cancelled: when the bus goes away (dbus-daemon restarted), the
    /// transport fails every call with `serviceUnavailable` (so records keep coming, saying why) while this
    /// reconnects with backoff (1 s, doubling, at most 30 s); then BlueZ, power and sleep follow the new bus.
    private func runSessions(
        first: DBusConnection, firstTransport: BlueZTransport, transport: ReconnectingTransport, engine: PollEngine
    ) async {
        var connection = first
        var session = firstTransport
        while true {
            transport.attach(session)
            let lost = await runSession(connection, transport: session, engine: engine)
            transport.attach(nil)
            await connection.close()
            guard let lost, !Task.isCancelled else { return }
            logger.error("lost the bus: polls fail until it is back; reconnecting", metadata: ["error": "\(lost)"])
            var delay = Duration.seconds(1)
            while true {
                do {
                    try await TimerFDClock().sleep(for: delay)
                } catch {
                    return  // shutting down
                }
                do {
                    connection = try await DBusConnection(bus: options.bus, timeout: .seconds(5))
                    break
                } catch {
                    logger.warning("reconnecting failed", metadata: ["error": "\(error)", "retryIn": "\(delay * 2)"])
                    delay = min(delay * 2, .seconds(30))
                }
            }
            session = BlueZTransport(connection: connection, logger: logger)
            logger.notice("reconnected to \(options.bus)")
            let check = session
            Task { await self.checkBlueZ(check) }
        }
    }

    /// BlueZ's object cache, the host's power and logind's sleep on one connection, until the bus is lost
    /// (returns the error) or the task is cancelled (returns nil).
    private func runSession(_ connection: DBusConnection, transport: BlueZTransport, engine: PollEngine) async -> (
        any Error
    )? {
        await withTaskGroup(of: (any Error)?.self) { group in
            group.addTask {
                await self.runControl(on: connection, engine: engine)
                return nil
            }
            if options.powerSource == nil {
                let power = await hostPower(connection)
                powerRelay.set(power.state)
                group.addTask { [powerRelay, logger] in
                    // Subscribe first, then run: no change is missed between the two.
                    let updates = power.updates()
                    await withTaskGroup(of: Void.self) { inner in
                        inner.addTask {
                            do {
                                try await power.run()
                            } catch is CancellationError {
                            } catch {
                                logger.warning("power sources stopped, polling at the normal interval: \(error)")
                                powerRelay.set(.normal)
                            }
                        }
                        for await state in updates { powerRelay.set(state) }
                        inner.cancelAll()
                    }
                    return nil
                }
            }
            if options.followsSleep {
                let keepAlive = self.keepAlive
                let sleep = SleepInhibitor(
                    connection: connection, logger: logger,
                    prepare: {
                        // Close the ledger, end the open windows (their records are written), drop every link.
                        await keepAlive.prepareForSleep()
                        await engine.waitUntilDisconnected()
                    },
                    resume: {
                        keepAlive.resumeAfterSleep()
                        await self.checkBlueZ(transport)
                    })
                group.addTask { [logger] in
                    do {
                        try await sleep.run()
                    } catch is CancellationError {
                    } catch {
                        logger.warning("stopped following logind's sleep: \(error)")
                    }
                    return nil
                }
            }
            group.addTask {
                do {
                    try await transport.runUntilCancelled()
                    return nil
                } catch is CancellationError {
                    return nil
                } catch {
                    return error
                }
            }
            // The cache's end decides: the bus is lost (or we are cancelled); the rest goes with it.
            var lost: (any Error)?
            for await result in group {
                if let result {
                    lost = result
                    break
                }
                if Task.isCancelled { break }
            }
            group.cancelAll()
            return lost
        }
    }

    /// The configuration's `low_power.mode` made into one power source (with the operator's override).
    private func hostPower(_ connection: DBusConnection) async -> CombinedPowerSource {
        let source: CombinedPowerSource
        let description: String
        switch configuration.powerMode {
        case .auto:
            (source, description) = await HostPowerSources.automatic(
                connection: connection,
                sysfsRoot: options.powerSupplyDirectory,
                criticalPercentage: Double(configuration.criticalPercentage),
                override: powerOverride,
                logger: logger
            )
        case .on:
            source = CombinedPowerSource([FixedPowerSource(.lowPower)], override: powerOverride, logger: logger)
            description = "low_power.mode on: always low power"
        case .off:
            source = CombinedPowerSource([FixedPowerSource(.normal)], override: powerOverride, logger: logger)
            description = "low_power.mode off: never low power"
        }
        logger.info("power source: \(description)")
        return source
    }

    /// SIGHUP, logrotate's way to say "the file was moved": the output file is opened again at its path. Caught even
    /// with no file to reopen, so that it never ends the daemon (its default action); until cancelled.
    private static func reopenOnHangUp(_ output: JSONLinesSink?, logger: Logger) async {
        let (signals, stopSignals) = ProcessIO.signals([SIGHUP])
        await withTaskCancellationHandler {
            for await _ in signals {
                guard let output, case .file = output.output else {
                    logger.notice("SIGHUP: no output file to reopen")
                    continue
                }
                do {
                    try output.reopen()
                    logger.notice("SIGHUP: reopened the output file", metadata: ["output": "\(output.output)"])
                } catch {
                    logger.error(
                        "SIGHUP: cannot reopen the output file; still writing the old one",
                        metadata: ["error": "\(error)"])
                }
            }
        } onCancel: {
            stopSignals()
        }
    }

    /// SIGUSR1 forces low power, SIGUSR2 gives the host back its say; until cancelled.
    private static func followOverrideSignals(_ override: ManualPowerSource, logger: Logger) async {
        let (signals, stopSignals) = ProcessIO.signals([SIGUSR1, SIGUSR2])
        await withTaskCancellationHandler {
            for await number in signals {
                if number == SIGUSR1 {
                    logger.notice("SIGUSR1: low power forced until SIGUSR2")
                    override.set(.lowPower)
                } else {
                    logger.notice("SIGUSR2: power follows the host again")
                    override.set(nil)
                }
            }
        } onCancel: {
            stopSignals()
        }
    }
}
