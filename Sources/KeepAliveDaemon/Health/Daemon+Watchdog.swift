internal import KeepAlive
internal import Basics

extension Daemon {
    /// Pings systemd's watchdog (`WATCHDOG=1`) only while the scheduler keeps up (``ProgressWatchdog``), from
    /// a thread of its own, so a scheduler whose tasks are stuck, or a cooperative pool that is all blocked, stops
    /// the pings instead of hiding behind them. Stalling and catching up are logged and shown in `STATUS=`.
    /// Returns the thread (stop it at shutdown), or `nil` without a watchdog.
    func startWatchdog(status: StatusBoard) -> PeriodicThread? {
        guard let notifier = options.notifier, let interval = notifier.watchdogInterval else { return nil }
        let keepAlive = self.keepAlive
        let logger = self.logger
        let tolerance = ProgressWatchdog.tolerance(forPingInterval: interval)
        let watchdog = Locked(ProgressWatchdog(tolerance: tolerance))
        let thread = PeriodicThread(interval: interval) {
            let liveness = keepAlive.liveness
            let decision = watchdog.withLock { $0.check(liveness) }
            if decision.ping {
                notifier.notify("WATCHDOG=1")
            }
            switch decision.change {
            case .stalled?:
                logger.critical(
                    "the scheduler is stalled: WATCHDOG=1 withheld, systemd restarts the daemon after WatchdogSec",
                    metadata: [
                        "late": "\(decision.lateness.compact)", "tolerance": "\(tolerance.compact)",
                        "openWindows": "\(liveness.openWindows)",
                    ]
                )
                let text = status.withLock { status in
                    status.stalledBy = decision.lateness
                    return status.text
                }
                notifier.notify("STATUS=\(text)")
            case .recovered?:
                logger.notice("the scheduler caught up: WATCHDOG=1 resumed")
                let text = status.withLock { status in
                    status.stalledBy = nil
                    return status.text
                }
                notifier.notify("STATUS=\(text)")
            case nil:
                break
            }
        }
        if thread == nil {
            logger.error("cannot start the watchdog thread: systemd's watchdog will restart the daemon")
        }
        return thread
    }

    /// Sends the current `STATUS=` line (after a change to `status`).
    static func publish(_ status: StatusBoard, to notifier: SystemdNotifier?) {
        guard let notifier else { return }
        notifier.notify("STATUS=\(status.withLock { $0.text })")
    }
}

extension Daemon {
    /// What `STATUS=` says now: for an embedding app or a bridge that wants to publish the daemon's health.
    public var status: DaemonStatus {
        statusBoard.withLock { $0 }
    }
}
