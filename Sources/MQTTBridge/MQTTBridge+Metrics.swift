import Basics
import CoreMetrics

extension MQTTBridge {
    /// Notes that the record at spool entry `id` was appended now.
    func noteSpooled(_ id: UInt64) {
        let now = ContinuousClock.now
        deliveryTimes.withLock { $0.spooled(id, at: now) }
    }

    /// The broker acknowledged (or refused for good) every record through entry `id`: their delivery times go to
    /// `keepalive_mqtt_delivery_seconds`.
    func noteAcknowledged(through id: UInt64) {
        let now = ContinuousClock.now
        let times = deliveryTimes.withLock { $0.acknowledged(through: id, at: now) }
        for time in times {
            let (seconds, attoseconds) = time.components
            deliveryTimer.recordNanoseconds(seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000)
        }
    }

    /// How long the oldest record in the spool has waited for the broker; `nil` when none waits. Records found on
    /// disk at start count from the bridge's start.
    public var oldestPendingAge: Duration? {
        guard let first = spool.withLock({ $0.first?.id }) else { return nil }
        let now = ContinuousClock.now
        return deliveryTimes.withLock { $0.age(ofOldest: first, at: now) }
    }
}
