import Basics
import KeepAlive
import Logging
import Polling
import ServiceLifecycle

#if canImport(Glibc)
    import Glibc
#endif

// The daemon's deferred tasks (README "Sensor history and clocks"): each device's `history:` download and
// `clock_sync:`, on a DeferredTaskScheduler beside the polls.

extension Daemon {
    /// Whether the configuration asks for any deferred work.
    var hasDeferredWork: Bool {
        configuration.devices.contains { $0.history != nil || $0.clockSync != nil }
    }

    /// Where the daemon keeps its state besides the spool: `state_directory:`, else systemd's `StateDirectory=`
    /// (`$STATE_DIRECTORY`), else /var/lib/keepalive.
    var stateDirectory: String {
        configuration.stateDirectory ?? DaemonConfiguration.defaultStateDirectory()
    }

    /// Runs each device's history downloads and clock syncs until the daemon shuts down.
    ///
    /// - A history download is a processing task: every `every` (the first at start, or when the pending one
    ///   kept in `deferred.json` says), only while the MQTT bridge is connected (with MQTT: else its records would
    ///   only fill the spool), only on external power unless `on_battery: true`.
    /// - A clock sync is a refresh task, every `every`, the first at start.
    ///
    /// Each holds its device (the polls' gate) for its link; a failure is tried again with backoff, and a request
    /// given up on is submitted again for its next usual time.
    func runDeferred(engine: PollEngine, after ready: Promise<Void>) async {
        // Not before BlueZ was checked (READY=1): a link asked for before then fails for nothing.
        guard await cancelWhenGracefulShutdown({ (try? await ready.value()) != nil }) else { return }
        let directory = stateDirectory
        if mkdir(directory, 0o750) != 0, errno != EEXIST {
            logger.error(
                """
                deferred tasks: cannot create the state directory \(directory) \
                (\(String(cString: strerror(errno)))): history and clock sync are off (set `state_directory:`)
                """)
            return
        }
        let network: ConditionSwitch? = bridge.map { bridge in
            let connected = ConditionSwitch(bridge.isConnected)
            bridge.onConnectionChange { connected.set($0) }
            return connected
        }
        let scheduler: DeferredTaskScheduler
        do {
            scheduler = try DeferredTaskScheduler(
                keepAlive: keepAlive, network: network,
                store: FileDeferredTaskStore(path: directory + "/deferred.json"),
                logger: logger)
        } catch {
            logger.error("deferred tasks: \(error)")
            return
        }
        let positions = HistoryPositions(path: directory + "/history.json", logger: logger)
        // The next request of each identifier, for a resubmission after a success or after one given up on.
        var next: [String: @Sendable () -> DeferredTaskRequest] = [:]
        for device in configuration.devices {
            let interval = device.interval ?? configuration.interval
            if let history = device.history {
                let identifier = "history.\(device.name)"
                let request: @Sendable () -> DeferredTaskRequest = { [network] in
                    DeferredTaskRequest(
                        identifier: identifier, kind: .processing, requiresNetwork: network != nil,
                        requiresExternalPower: !history.onBattery)
                }
                next[identifier] = request
                let download = HistoryDownload(
                    device: device, interval: interval, engine: engine, keepAlive: keepAlive, positions: positions,
                    submit: { [sequencer] in sequencer.submit($0) }, logger: logger)
                try? scheduler.register(identifier, kind: .processing) { [logger] task in
                    let published = try await download.run()
                    logger.info(
                        "history downloaded", metadata: ["device": "\(device.name)", "published": "\(published)"])
                    var again = request()
                    again.earliestBegin = task.window.began + history.every
                    try? scheduler.submit(again)
                }
            }
            if let sync = device.clockSync {
                let identifier = "clock.\(device.name)"
                let request: @Sendable () -> DeferredTaskRequest = {
                    DeferredTaskRequest(identifier: identifier, kind: .refresh)
                }
                next[identifier] = request
                let clockSync = ClockSync(device: device, sync: sync, engine: engine)
                try? scheduler.register(identifier, kind: .refresh) { [logger] task in
                    let (seconds, zone) = try await clockSync.run()
                    logger.info(
                        "clock set",
                        metadata: ["device": "\(device.name)", "unix": "\(seconds)", "utcOffsetHours": "\(zone)"])
                    var again = request()
                    again.earliestBegin = task.window.began + sync.every
                    try? scheduler.submit(again)
                }
            }
        }
        // What the last run left pending stays (its time kept); what the file no longer asks for goes.
        for pending in scheduler.pendingRequests where next[pending.identifier] == nil {
            scheduler.cancel(pending.identifier)
        }
        for (identifier, request) in next.sorted(by: { $0.key < $1.key }) where scheduler.status(of: identifier) == nil
        {
            try? scheduler.submit(request())
        }
        let events = scheduler.events()
        let every: [String: Duration] = Dictionary(
            uniqueKeysWithValues: configuration.devices.flatMap { device in
                [
                    device.history.map { ("history.\(device.name)", $0.every) },
                    device.clockSync.map { ("clock.\(device.name)", $0.every) },
                ].compactMap { $0 }
            })
        await withDiscardingTaskGroup { group in
            group.addTask { [next] in
                for await event in events {
                    // Given up on after its attempts: it comes again at its next usual time.
                    guard case .failed(let error, _, nil) = event, let request = next[error.identifier] else {
                        continue
                    }
                    var again = request()
                    again.earliestBegin = scheduler.now + (every[error.identifier] ?? .seconds(86_400))
                    try? scheduler.submit(again)
                }
            }
            try? await scheduler.run()
            group.cancelAll()
        }
    }
}
