/// Placement: what this gateway hears, what it tells the others, and who should hold each device.
extension FleetGateway {
    mutating func observe(
        device: String, adapter: String, rssi: Int, at now: FleetInstant, into effects: inout [FleetEffect]
    ) {
        guard let state = devices[device] else { return }
        let couldReach = canReach(state, at: now)
        let sample = rssi * 16
        var observation = state.observations[adapter] ?? SharedDevice.Observation(rssiSixteenths: sample, at: now)
        if now.nanoseconds - observation.at.nanoseconds > configuration.observationStaleNanoseconds {
            observation.rssiSixteenths = sample
        } else {
            // Smoothing by a quarter per advertisement: one loud or quiet packet moves the score by a few dB only.
            observation.rssiSixteenths += (sample - observation.rssiSixteenths) / 4
        }
        observation.at = now
        devices[device]?.observations[adapter] = observation
        // A holder re-judges placement with every advertisement (the dwell must see the challenger better at each
        // look, and more looks make a lucky reading less likely to carry a move). A non-holder only cares about
        // the change from "cannot reach" to "can reach", which makes a claim possible.
        if !couldReach || state.isHolding { evaluate(device, at: now, into: &effects) }
    }

    func canReach(_ state: SharedDevice, at now: FleetInstant) -> Bool {
        state.observations.values.contains {
            now.nanoseconds - $0.at.nanoseconds <= configuration.observationStaleNanoseconds
        }
    }

    func freeSlots(on adapter: String, for device: String) -> Int {
        let slots = configuration.adapters.first { $0.name == adapter }?.slots ?? 0
        let heldHere = devices[device]?.isHolding == true && devices[device]?.adapter == adapter ? 1 : 0
        return slots - heldPerAdapter[adapter, default: 0] + heldHere
    }

    func ownScore(for device: String, on adapter: String, at now: FleetInstant) -> Int? {
        guard let state = devices[device], let observation = state.observations[adapter],
            now.nanoseconds - observation.at.nanoseconds <= configuration.observationStaleNanoseconds
        else { return nil }
        return Placement.score(
            rssi: observation.rssi, successPermille: state.successPermille,
            freeSlots: freeSlots(on: adapter, for: device))
    }

    /// This gateway's best adapter for the device, by score (then name).
    func bestOwnAdapter(for device: String, at now: FleetInstant, excluding excluded: String? = nil) -> (
        adapter: String, score: Int
    )? {
        var best: (name: String, score: Int)?
        for adapter in configuration.adapters where adapter.name != excluded {
            guard let score = ownScore(for: device, on: adapter.name, at: now) else { continue }
            if best == nil || Placement.isBetter((adapter.name, score), than: best!) { best = (adapter.name, score) }
        }
        return best.map { ($0.name, $0.score) }
    }

    /// This gateway's score for the device: on its holding adapter while holding, else on its best adapter.
    func ownScore(for device: String, at now: FleetInstant) -> Int? {
        if let state = devices[device], state.isHolding, let adapter = state.adapter {
            return ownScore(for: device, on: adapter, at: now)
        }
        return bestOwnAdapter(for: device, at: now)?.score
    }

    /// The best other gateway that reports it can take the device: online, recent report, hears it, has a slot.
    func bestChallenger(for device: String, at now: FleetInstant) -> (name: String, score: Int)? {
        guard let state = devices[device] else { return nil }
        var best: (name: String, score: Int)?
        for (gateway, received) in state.reports {
            guard let score = reportedScore(received, gateway: gateway, at: now) else { continue }
            if best == nil || Placement.isBetter((gateway, score), than: best!) { best = (gateway, score) }
        }
        return best
    }

    private func reportedScore(_ received: SharedDevice.ReceivedReport, gateway: String, at now: FleetInstant) -> Int? {
        guard statuses[gateway] != .offline,
            now.nanoseconds - received.at.nanoseconds <= configuration.reportStaleNanoseconds
        else { return nil }
        let report = received.report
        return Placement.score(rssi: report.rssi, successPermille: report.successPermille, freeSlots: report.freeSlots)
    }

    /// How many candidates outrank this gateway for a claim (0 = best), or nil if it cannot take the device.
    func claimRank(for device: String, at now: FleetInstant) -> Int? {
        guard let state = devices[device], canReach(state, at: now), let own = ownScore(for: device, at: now) else {
            return nil
        }
        var rank = 0
        for (gateway, received) in state.reports {
            guard let score = reportedScore(received, gateway: gateway, at: now) else { continue }
            if Placement.isBetter((gateway, score), than: (configuration.gateway, own)) { rank += 1 }
        }
        return rank
    }

    mutating func challengeDecision(for device: String, at now: FleetInstant) -> ChallengeTracker.Decision {
        guard var tracker = devices[device]?.gatewayChallenge else { return .stay }
        let decision = tracker.evaluate(
            incumbent: ownScore(for: device, at: now), best: bestChallenger(for: device, at: now),
            marginDecibels: configuration.moveMarginDecibels, dwellNanoseconds: configuration.moveDwellNanoseconds,
            now: now)
        devices[device]?.gatewayChallenge = tracker
        return decision
    }

    /// Moves a held device to a better adapter of this gateway by the same rule; returns when to look again.
    mutating func chooseAdapterWhileHolding(
        _ device: String, at now: FleetInstant, into effects: inout [FleetEffect]
    ) -> FleetInstant? {
        guard let state = devices[device], let current = state.adapter, configuration.adapters.count > 1 else {
            return nil
        }
        var tracker = state.adapterChallenge
        let other = bestOwnAdapter(for: device, at: now, excluding: current)
        let decision = tracker.evaluate(
            incumbent: ownScore(for: device, on: current, at: now), best: other.map { ($0.adapter, $0.score) },
            marginDecibels: configuration.moveMarginDecibels, dwellNanoseconds: configuration.moveDwellNanoseconds,
            now: now)
        devices[device]?.adapterChallenge = tracker
        switch decision {
        case .stay: return nil
        case .wait(let until): return until
        case .move(to: let adapter):
            heldPerAdapter[current, default: 1] -= 1
            heldPerAdapter[adapter, default: 0] += 1
            devices[device]?.adapter = adapter
            effects.append(.adapterChanged(device: device, adapter: adapter))
            return nil
        }
    }

    /// Publishes one retained report per shared device: what this gateway would bring if it held it.
    mutating func publishReach(at now: FleetInstant, into effects: inout [FleetEffect]) {
        guard isConnected else { return }
        for device in deviceOrder {
            guard let state = devices[device] else { continue }
            let adapter =
                state.adapter ?? bestOwnAdapter(for: device, at: now)?.adapter
                ?? configuration.adapters.first?.name ?? ""
            let observation = state.observations[adapter]
            let fresh =
                observation.map { now.nanoseconds - $0.at.nanoseconds <= configuration.observationStaleNanoseconds }
                ?? false
            let report = ReachReport(
                gateway: configuration.gateway, adapter: adapter, rssi: fresh ? observation?.rssi : nil,
                successPermille: state.successPermille, freeSlots: max(0, freeSlots(on: adapter, for: device)))
            effects.append(
                .publish(
                    topic: configuration.topics.reach(of: device, by: configuration.gateway), payload: report.encoded(),
                    retained: true))
        }
    }
}
