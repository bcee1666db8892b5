import Basics

/// The daemon's ``DaemonStatus`` under a lock, telling its observers of every change (the MQTT bridge publishes
/// it; `STATUS=` is sent by whoever changed it, as before).
final class StatusBoard: Sendable {
    private let status: Locked<DaemonStatus>
    private let observers = Locked<[@Sendable (DaemonStatus) -> Void]>([])

    init(_ initial: DaemonStatus) {
        status = Locked(initial)
    }

    /// Changes (or reads) the status; observers see the new value, outside the lock, when it changed.
    func withLock<T>(_ body: (inout DaemonStatus) -> T) -> T {
        let (result, changed) = status.withLock { status -> (T, DaemonStatus?) in
            let before = status
            let result = body(&status)
            return (result, status == before ? nil : status)
        }
        if let changed {
            for observer in observers.withLock({ $0 }) { observer(changed) }
        }
        return result
    }

    /// Calls `observer` with every change from now on (from the thread that made it: return quickly).
    func observe(_ observer: @escaping @Sendable (DaemonStatus) -> Void) {
        observers.withLock { $0.append(observer) }
    }
}
