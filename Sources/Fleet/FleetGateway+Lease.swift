/// The lease: applying the topic's messages, claiming, renewing, fencing and releasing.
extension FleetGateway {
    func isOwn(_ id: FleetMessageID) -> Bool {
        id.gateway == configuration.gateway && id.incarnation == configuration.incarnation
    }

    mutating func applyLease(
        _ message: LeaseMessage, device: String, retained: Bool, at now: FleetInstant, into effects: inout [FleetEffect]
    ) {
        guard var state = devices[device] else { return }
        let outcome = state.view.apply(message, retained: retained, receivedAt: now)
        guard outcome != .duplicate else { return }
        let own = isOwn(message.id)
        let sent = own ? state.sentAt.removeValue(forKey: message.id.sequence) : nil
        devices[device] = state
        let fenceAfterSend = configuration.fenceAfterSendNanoseconds

        switch (outcome, own) {
        case (.accepted, true):
            switch message.kind {
            case .claim:
                if case .claiming(let id, let handover) = state.role, id == message.id, let sent,
                    now < sent + fenceAfterSend
                {
                    startHold(device, sentAt: sent, handover: handover, at: now, into: &effects)
                } else if isConnected, !state.isHolding {
                    // Our claim won after we gave up on it: others now wait for a holder that will not poll.
                    // Releasing at once (we are not polling) spares them the lease.
                    publishLease(.release, device: device, successor: nil, at: now, into: &effects)
                    devices[device]?.role = .releasing(message.id, successor: nil)
                }
            case .renew:
                if state.isHolding, let sent, let fence = state.fence {
                    let extended = max(fence, sent + fenceAfterSend)
                    devices[device]?.fence = extended
                    if extended != fence { effects.append(.holdExtended(device: device, until: extended)) }
                }
            case .release:
                if case .releasing = state.role { devices[device]?.role = .observing }
            }
        case (.accepted, false):
            if state.isHolding { endHold(device, reason: .claimedBy(message.id.gateway), into: &effects) }
        case (.rejected, true):
            effects.append(.diagnostic(.ownMessageRejected(device: device, kind: message.kind)))
            switch (message.kind, state.role) {
            case (.claim, .claiming(let id, _)) where id == message.id:
                devices[device]?.role = .observing
            case (.renew, .holding):
                // Someone's message slipped in between; chain the renewal onto it at once — but only for the latest
                // renewal we sent (nothing of ours still in flight): retrying every rejected one would make our own
                // retries reject each other forever. Old copies (retained, from before a reconnect) retry nothing.
                if sent != nil, state.sentAt.isEmpty, isConnected, let fence = state.fence, now < fence {
                    publishLease(.renew, device: device, successor: nil, at: now, into: &effects)
                    devices[device]?.lastRenewalSent = now
                }
            case (.release, .releasing(_, let successor)):
                if sent != nil, state.sentAt.isEmpty, isConnected {
                    let id = publishLease(.release, device: device, successor: successor, at: now, into: &effects)
                    devices[device]?.role = .releasing(id, successor: successor)
                }
            default: break
            }
        case (.rejected, false), (.duplicate, _):
            break
        }
        evaluate(device, at: now, into: &effects)
    }

    /// Decides what the device needs now (fence, renewal, placement move, claim) and arms its timer for the next
    /// instant something could change without a message.
    mutating func evaluate(_ device: String, at now: FleetInstant, into effects: inout [FleetEffect]) {
        guard let state = devices[device] else { return }
        if state.isHolding, let fence = state.fence, now >= fence {
            endHold(device, reason: .fenced, into: &effects)
        }
        if let oldest = devices[device]?.oldestUnechoed, now >= oldest + configuration.echoTimeoutNanoseconds {
            // Lost on a connection that has not noticed yet, or not yet delivered: either way, stop waiting for it
            // (a message that still arrives later only counts if the rule accepts it).
            switch devices[device]?.role {
            case .claiming?:
                effects.append(.diagnostic(.echoTimedOut(device: device, kind: .claim)))
                devices[device]?.role = .observing
            case .releasing?:
                effects.append(.diagnostic(.echoTimedOut(device: device, kind: .release)))
                devices[device]?.role = .observing
            default:
                effects.append(.diagnostic(.echoTimedOut(device: device, kind: .renew)))
            }
            devices[device]?.sentAt = [:]
        }
        var deadlines: [FleetInstant] = []
        if devices[device]?.isHolding == true {
            evaluateHold(device, at: now, deadlines: &deadlines, into: &effects)
        }
        if devices[device]?.role == .observing, isConnected, !stopped, let claimAt = claimTime(for: device, at: now) {
            if now >= claimAt {
                let handover = predictedHandover(for: device)
                let id = publishLease(.claim, device: device, successor: nil, at: now, into: &effects)
                devices[device]?.role = .claiming(id, handover: handover)
            } else {
                deadlines.append(claimAt)
            }
        }
        if let oldest = devices[device]?.oldestUnechoed {
            deadlines.append(oldest + configuration.echoTimeoutNanoseconds)
        }
        if let deadline = deadlines.min(), devices[device]?.armedDeadline != deadline {
            devices[device]?.armedDeadline = deadline
            effects.append(.armTimer(.device(device), at: deadline))
        }
    }

    private mutating func evaluateHold(
        _ device: String, at now: FleetInstant, deadlines: inout [FleetInstant], into effects: inout [FleetEffect]
    ) {
        if let until = chooseAdapterWhileHolding(device, at: now, into: &effects) { deadlines.append(until) }
        if isConnected, !stopped {
            switch challengeDecision(for: device, at: now) {
            case .stay: break
            case .wait(let until): deadlines.append(until)
            case .move(to: let successor):
                release(device, to: successor, at: now, into: &effects)
                return
            }
        }
        guard let state = devices[device], let fence = state.fence else { return }
        deadlines.append(fence)
        guard isConnected else { return }
        let renewAt = (state.lastRenewalSent ?? now) + configuration.renewPeriodNanoseconds
        if now >= renewAt {
            publishLease(.renew, device: device, successor: nil, at: now, into: &effects)
            devices[device]?.lastRenewalSent = now
            deadlines.append(now + configuration.renewPeriodNanoseconds)
        } else {
            deadlines.append(renewAt)
        }
    }

    /// When this gateway may claim, or nil if it may not at all (cannot reach the device, or no slot).
    func claimTime(for device: String, at now: FleetInstant) -> FleetInstant? {
        guard let state = devices[device], let rank = claimRank(for: device, at: now) else { return nil }
        let stagger = configuration.claimStaggerNanoseconds
        switch state.view.state {
        case .released(_, let successor?):
            return state.view.basis + (successor == configuration.gateway ? 0 : Int64(rank + 1) * stagger)
        case .released(_, nil):
            return state.view.basis + Int64(rank) * stagger
        case .held, .unknown:
            let wait = max(configuration.leaseNanoseconds, state.view.longestLeaseNanoseconds)
            return state.view.basis + wait + Int64(rank) * stagger
        }
    }

    /// What the record will say if the claim about to be sent wins.
    func predictedHandover(for device: String) -> Handover? {
        guard let view = devices[device]?.view else { return nil }
        let previous: String?
        switch view.state {
        case .released(let gateway, _): return Handover(from: gateway, reason: .released)
        case .held(let gateway, _): previous = gateway
        case .unknown: previous = view.presumedHolder
        }
        guard let previous else { return nil }
        return Handover(from: previous, reason: statuses[previous] == .offline ? .will : .expired)
    }

    @discardableResult
    mutating func publishLease(
        _ kind: LeaseMessage.Kind, device: String, successor: String?, at now: FleetInstant,
        into effects: inout [FleetEffect]
    ) -> FleetMessageID {
        let id = nextMessageID()
        let previous = devices[device]?.view.last
        let message = LeaseMessage(
            kind: kind, id: id, previous: previous, leaseNanoseconds: configuration.leaseNanoseconds,
            successor: successor)
        devices[device]?.sentAt[id.sequence] = now
        effects.append(
            .publish(topic: configuration.topics.lease(of: device), payload: message.encoded(), retained: true))
        return id
    }

    private mutating func startHold(
        _ device: String, sentAt sent: FleetInstant, handover: Handover?, at now: FleetInstant,
        into effects: inout [FleetEffect]
    ) {
        let adapter = bestOwnAdapter(for: device, at: now)?.adapter ?? configuration.adapters.first?.name ?? ""
        let fence = sent + configuration.fenceAfterSendNanoseconds
        devices[device]?.role = .holding
        devices[device]?.fence = fence
        devices[device]?.lastRenewalSent = sent
        devices[device]?.adapter = adapter
        devices[device]?.pendingHandover = handover
        devices[device]?.gatewayChallenge = ChallengeTracker()
        devices[device]?.adapterChallenge = ChallengeTracker()
        heldPerAdapter[adapter, default: 0] += 1
        effects.append(.holdStarted(device: device, adapter: adapter, until: fence, handover: handover))
    }

    mutating func endHold(_ device: String, reason: HoldEndReason, into effects: inout [FleetEffect]) {
        guard let state = devices[device], state.isHolding else { return }
        if let adapter = state.adapter { heldPerAdapter[adapter, default: 1] -= 1 }
        devices[device]?.role = .observing
        devices[device]?.fence = nil
        devices[device]?.adapter = nil
        devices[device]?.pendingHandover = nil
        devices[device]?.gatewayChallenge = ChallengeTracker()
        devices[device]?.adapterChallenge = ChallengeTracker()
        effects.append(.holdEnded(device: device, reason: reason))
    }

    /// Stops polling first, then says so: the release is only sent once no poll can follow it.
    mutating func release(
        _ device: String, to successor: String?, at now: FleetInstant, into effects: inout [FleetEffect]
    ) {
        endHold(device, reason: .released(to: successor), into: &effects)
        guard isConnected else { return }
        let id = publishLease(.release, device: device, successor: successor, at: now, into: &effects)
        devices[device]?.role = .releasing(id, successor: successor)
    }
}
