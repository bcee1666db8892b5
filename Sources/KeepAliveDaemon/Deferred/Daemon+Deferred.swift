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
        // Each identifier's next request and how long after a run it comes: after a success, or after one given up
        // on.
        var plan: [String: (request: @Sendable () -> DeferredTaskRequest, every: Duration)] = [:]
        for device in configuration.devices {
            if let history = device.history {
                let identifier = "history.\(device.name)"
                plan[identifier] = (
                    { [network] in
                        DeferredTaskRequest(
                            identifier: identifier, kind: .processing, requiresNetwork: network != nil,
                            requiresExternalPower: !history.onBattery)
                    }, history.every
                )
            }
            if let sync = device.clockSync {
                let identifier = "clock.\(device.name)"
                plan[identifier] = ({ DeferredTaskRequest(identifier: identifier, kind: .refresh) }, sync.every)
            }
        }
        let work = plan
        @Sendable func again(_ identifier: String, after start: KeepAliveInstant) {
            guard let next = work[identifier] else { return }
            var request = next.request()
            request.earliestBegin = start + next.every
            try? scheduler.submit(request)
        }
        for device in configuration.devices {
            if device.history != nil {
                let identifier = "history.\(device.name)"
                let download = HistoryDownload(
                    device: device, interval: device.interval ?? configuration.interval, engine: engine,
                    keepAlive: keepAlive, positions: positions, submit: { [sequencer] in sequencer.submit($0) },
                    logger: logger)
                try? scheduler.register(identifier, kind: .processing) { [logger] task in
                    let published = try await download.run()
                    logger.info(
                        "history downloaded", metadata: ["device": "\(device.name)", "published": "\(published)"])
                    again(identifier, after: task.window.began)
                }
            }
            if let sync = device.clockSync {
                let identifier = "clock.\(device.name)"
                let clockSync = ClockSync(device: device, sync: sync, engine: engine)
                try? scheduler.register(identifier, kind: .refresh) { [logger] task in
                    let (seconds, zone) = try await clockSync.run()
                    logger.info(
                        "clock set",
                        metadata: ["device": "\(device.name)", "unix": "\(seconds)", "utcOffsetHours": "\(zone)"])
                    again(identifier, after: task.window.began)
                }
            }
        }
        // What the last run left pending stays (its time kept); what the file no longer asks for goes.
        for pending in scheduler.pendingRequests where work[pending.identifier] == nil {
            scheduler.cancel(pending.identifier)
        }
        for (identifier, next) in work.sorted(by: { $0.key < $1.key }) where scheduler.status(of: identifier) == nil {
            try? scheduler.submit(next.request())
        }
        let events = scheduler.events()
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await event in events {
                    // Given up on after its attempts: it comes again at its next usual time.
                    if case .failed(let error, _, nil) = event { again(error.identifier, after: scheduler.now) }
                }
            }
            try? await scheduler.run()
            group.cancelAll()
        }
    }
}
