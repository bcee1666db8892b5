import KeepAlive
import Readings

extension PollEngine {
    /// Advertisements heard from `device` since its last tick took them (0 for a device not listened to).
    package func advertisementsHeard(_ device: String) -> Int {
        guard let listener, let spec = devices[device]?.spec else { return 0 }
        return listener.heardCount(address: spec.peripheral.address, adapter: spec.peripheral.adapter)
    }

    /// A scheduled tick of a device whose advertisements are listened to, when it takes a path of its own: a
    /// passive sensor's (no slot, no Connect: what was heard), or a gated poll of a device not heard since its
    /// last tick (it waits a little for the device, then polls or records `notHeard`). `nil`: the usual path.
    func listenedTo(
        _ admitted: inout Admitted, device: PolledDevice, start: @escaping @Sendable (@escaping LaunchWork) -> Void
    ) -> LaunchRequest? {
        guard let listener, admitted.spec.listensToAdvertisements else { return nil }
        listener.start()
        if admitted.spec.isPassive {
            let admitted = admitted
            start { [weak self] window in
                guard let self else { return LaunchResult(.failed(CancellationError())) }
                let outcome = await self.passiveOutcome(admitted, of: device, in: window)
                // Backing off spares a sensor's battery and the radio; a passive sensor costs neither, and its
                // skipped ticks would only hide what it says (a wrong key, a replayed counter, silence).
                return LaunchResult(outcome.result, detail: outcome, keepsBackoff: true)
            }
            return .started
        }
        // A gated poll: heard since the last tick, it goes the usual way (and its record says how often).
        let configured = device.spec.peripheral
        let heard = listener.take(address: configured.address, adapter: configured.adapter)
        admitted.heard = PollRecord.Heard(count: heard.count, rssi: heard.rssi)
        if heard.count > 0 { return nil }
        let silent = admitted
        start { [weak self] window in
            var admitted = silent
            guard let self else { return LaunchResult(.failed(CancellationError())) }
            // A quarter of the window at most (5 s), so a device that speaks now is still polled in time.
            let wait = min(window.timeRemaining / 4, .seconds(5))
            let spoke = await listener.waitHeard(
                address: configured.address, adapter: configured.adapter, until: window.time.now + wait)
            guard spoke else {
                var outcome = admitted.outcome(
                    .failed(
                        TransportError(
                            .notHeard,
                            """
                            \(configured.address) was not heard advertising since its last tick (or \(wait.compact) \
                            into this one): no Connect sent (poll_when: heard)
                            """)))
                outcome.heard = PollRecord.Heard(count: 0)
                return LaunchResult(outcome.result, detail: outcome, keepsBackoff: true)
            }
            let now = listener.take(address: configured.address, adapter: configured.adapter)
            admitted.heard = PollRecord.Heard(count: now.count, rssi: now.rssi)
            let outcome = await self.acquireAndPoll(admitted, device: device, in: window)
            return LaunchResult(outcome.result, detail: outcome, isContention: outcome.failure?.code == .noSlot)
        }
        return .started
    }

    /// A passive sensor's tick: what was heard since the last one. Silent so far, it waits for the device until
    /// a little before the window's end (the first tick after start, a sensor that advertises every few seconds).
    func passiveOutcome(_ admitted: Admitted, of device: PolledDevice, in window: PollWindow) async -> PollOutcome {
        guard let listener else { return admitted.outcome(.noData) }
        // Heard where it is configured: a fleet's holder may name another adapter for the record.
        let configured = device.spec.peripheral
        let remaining = window.timeRemaining
        let deadline = window.time.now + (remaining - min(remaining / 10, .milliseconds(250)))
        _ = await listener.waitHeard(address: configured.address, adapter: configured.adapter, until: deadline)
        let heard = listener.take(address: configured.address, adapter: configured.adapter)
        var outcome = admitted.outcome(.noData)
        outcome.heard = PollRecord.Heard(
            count: heard.count, rssi: heard.rssi, packetID: heard.packetID, format: heard.payload?.format)
        guard heard.count > 0 else {
            let since = heard.lastHeard.map { "last heard \($0.duration(to: window.time.now).compact) ago" }
            outcome.result = .failed(
                TransportError(
                    .notHeard,
                    "\(configured.address) was not heard advertising during its interval"
                        + (since.map { " (\($0))" } ?? " (never heard since start)")))
            return outcome
        }
        if let refusal = heard.refusal, !heard.isNew {
            outcome.result = .failed(TransportError(.badAdvertisement, "\(refusal.code): \(refusal.message)"))
            return outcome
        }
        outcome.readings = heard.payload?.readings ?? []
        outcome.result = heard.isNew ? .newData : .noData
        return outcome
    }
}
