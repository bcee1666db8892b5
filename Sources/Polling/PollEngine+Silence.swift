import KeepAlive
import Basics

extension PollEngine {
    /// Zombie links (issue #15): throws ``TransportError/Code/silentLink`` as soon as `bound` passes with no
    /// notification (counted from the subscription, then from the last one heard), while the stream is still
    /// open, that is while BlueZ still says the link is up. Returns, satisfied, at `end` (the listening's end).
    static func watchSilence(
        of subscription: PeripheralSpec.Subscription, bound: Duration, lastHeard: Locked<KeepAliveInstant>,
        until end: KeepAliveInstant,
        time: TimeBase
    ) async throws {
        while true {
            let deadline = lastHeard.withLock { $0 } + bound
            guard deadline < end else {
                // No silence can reach the bound before the listening ends: nothing left to watch.
                try await time.sleep(until: end)
                return
            }
            try await time.sleep(until: deadline)
            let heard = lastHeard.withLock { $0 }
            if heard + bound <= time.now {
                throw TransportError(
                    .silentLink,
                    """
                        no notification from \(subscription.characteristic.shortDescription) for \(bound.compact) \
                        while the link is up (zombie link): dropping it
                        """
                )
            }
        }
    }
}
