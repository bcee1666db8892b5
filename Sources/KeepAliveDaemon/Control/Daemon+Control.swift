import Basics
import DBus
import KeepAlive
import Logging
import Polling

extension Daemon {
    /// The board of the configuration's devices (``DeviceBoard``), on the scheduler's clock.
    static func deviceBoard(
        _ configuration: DaemonConfiguration, keepAlive: KeepAlive, status: StatusBoard
    ) -> DeviceBoard {
        let devices = configuration.peripheralSpecs().map { spec in
            DeviceBoard.Device(
                name: spec.name, address: spec.peripheral.address, adapter: spec.peripheral.adapter,
                passive: spec.isPassive, listened: spec.listensToAdvertisements,
                interval: spec.interval ?? configuration.interval)
        }
        return DeviceBoard(
            devices: devices, clock: { [keepAlive] in keepAlive.time.now },
            unhealthyAdapters: { [status] in status.withLock { $0.unhealthyAdapters } })
    }

    /// What the control interface tells its listeners, in the order it happened.
    enum ControlSignal: Sendable {
        /// A record's device and its line.
        case record(String, String)
        case health(DaemonStatus)
    }

    /// Exports `io.keepalive.Daemon1` on `connection`, asks for `io.keepalive` (``ControlInterface``), then emits
    /// a `PropertiesChanged` for each change of health and, while a client watches (`WatchRecords`), a `Record`
    /// signal for each record, in order, until cancelled (the connection is lost, or the daemon stops). Without the
    /// name (the D-Bus policy not installed, another daemon has it) the daemon polls as before and says why there is
    /// no control interface.
    func runControl(on connection: DBusConnection, engine: PollEngine) async {
        // Records come from the thread that finished the poll; the connection is an actor: one task sends them, in
        // order. A bus that stalls keeps the newest 1,024, never the daemon.
        let (signals, continuation) = AsyncStream<ControlSignal>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let (watchRequests, watchContinuation) = AsyncStream<(String, Bool)>.makeStream()
        var control = ControlInterface(
            board: board, engine: engine, keepAlive: keepAlive, configuration: configuration, status: statusBoard,
            bridge: bridge, commandPolls: commandPolls, logger: logger)
        control.watch = { sender, watching in watchContinuation.yield((sender, watching)) }
        do {
            try await connection.export(control.object, at: ControlInterface.path)
            let reply = try await connection.requestName(ControlInterface.busName, flags: [.doNotQueue])
            guard reply == .primaryOwner || reply == .alreadyOwner else {
                logger.warning(
                    """
                    another process owns \(ControlInterface.busName) on this bus: `keepalive status` and the other \
                    control commands reach that one, not this daemon
                    """)
                return
            }
        } catch {
            logger.warning(
                """
                no control interface (`keepalive status`, `explain`, `poll`): cannot own \(ControlInterface.busName) \
                on the bus (is the D-Bus policy io.keepalive.conf installed?)
                """, metadata: ["error": "\(error)"])
            return
        }
        logger.info("control interface ready", metadata: ["name": "\(ControlInterface.busName)"])
        controlSignals.withLock { $0 = continuation }
        defer {
            board.observeRecords(nil)
            controlSignals.withLock { $0 = nil }
        }
        // The unique names of the clients watching records. Without one, records cost the control interface
        // nothing: no signal is made, no task woken.
        let watchers = Locked<Set<String>>([])
        let board = self.board
        @Sendable func watch(_ sender: String, _ watching: Bool) {
            let (before, after) = watchers.withLock { watchers in
                let before = watchers.count
                if watching { watchers.insert(sender) } else { watchers.remove(sender) }
                return (before, watchers.count)
            }
            if before == 0, after > 0 {
                board.observeRecords { continuation.yield(.record($0.record.device, $0.line)) }
            } else if before > 0, after == 0 {
                board.observeRecords(nil)
            }
        }
        await withTaskCancellationHandler {
            await withDiscardingTaskGroup { group in
                group.addTask {
                    for await signal in signals {
                        switch signal {
                        case .record(let device, let line):
                            try? await connection.emitSignal(
                                path: ControlInterface.path, interface: ControlInterface.interface, member: "Record",
                                arguments: [.string(device), .string(line)])
                        case .health(let status):
                            try? await connection.propertiesChanged(
                                path: ControlInterface.path, interface: ControlInterface.interface,
                                changed: ["Health": .string(status.text), "Healthy": .boolean(status.isHealthy)])
                        }
                    }
                }
                for await (sender, watching) in watchRequests {
                    let added = watching && !watchers.withLock { $0.contains(sender) }
                    watch(sender, watching)
                    guard added else { continue }
                    // A watcher that leaves the bus without `UnwatchRecords` stops the signals too.
                    group.addTask {
                        do {
                            let changes = try await connection.nameOwnerChanges(for: sender)
                            if try await connection.nameOwner(of: sender) != nil {
                                for try await change in changes where change.newOwner == nil { break }
                            }
                        } catch {}
                        if !Task.isCancelled { watch(sender, false) }
                    }
                }
            }
        } onCancel: {
            continuation.finish()
            watchContinuation.finish()
        }
    }
}
