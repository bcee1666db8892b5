import Fleet

/// The network and the faults: effects become packets on FIFO links, the broker orders and fans them out.
extension FleetSimulator {
    mutating func delay() -> Int64 {
        if random.chance(permille: scenario.spikePermille) {
            return random.integer(in: scenario.delay.upperBound...scenario.spikeDelay)
        }
        return random.integer(in: scenario.delay)
    }

    mutating func perform(_ effects: [FleetEffect], of gateway: Int) {
        var packets: [Packet] = []
        for effect in effects {
            if let traced = traceDevice {
                let text = "\(effect)"
                if text.contains("\"\(traced)\"") || text.contains("/\(traced)/lease") {
                    print("t=\(Double(now) / 1e9) \(gateways[gateway].name): \(text.prefix(200))")
                }
            }
            switch effect {
            case .publish(let topic, let payload, let retained):
                packets.append(.publish(topic: topic, payload: payload, retain: retained))
                report.publishes += 1
            case .subscribe(let filter): packets.append(.subscribe(filter: filter))
            case .armTimer(let timer, let at):
                let generation = (gateways[gateway].timerGenerations[timer] ?? 0) + 1
                gateways[gateway].timerGenerations[timer] = generation
                let due = max(now, gateways[gateway].clock.trueTime(atLocal: at.nanoseconds))
                queue.schedule(
                    .timer(gateway: gateway, life: gateways[gateway].life, timer: timer, generation: generation),
                    at: due)
            case .holdStarted(let device, _, let until, let handover):
                if handover != nil { report.handovers += 1 }
                entitle(device: device, gateway: gateway, until: until, starting: true)
            case .holdExtended(let device, let until):
                entitle(device: device, gateway: gateway, until: until, starting: false)
            case .adapterChanged: break
            case .holdEnded(let device, let reason):
                endEntitlement(device: device, gateway: gateway)
                if case .released = reason, !gateways[gateway].stopping {
                    report.placementMoves += 1
                    if now > convergenceAt {
                        report.movesAfterConvergence += 1
                        violation(
                            """
                                \(device) moved by \(gateways[gateway].name) after convergence: \(reason) true RSSI \
                                \(trueRSSI(of: device))
                                """
                        )
                    }
                }
            case .diagnostic(let diagnostic):
                switch diagnostic {
                case .ownMessageRejected(_, let kind): report.rejectedOwnMessages[kind.rawValue, default: 0] += 1
                case .malformed, .unknownTopic, .unknownDevice, .mismatchedGateway: report.malformed += 1
                case .echoTimedOut: report.echoTimeouts += 1
                }
            }
        }
        guard !packets.isEmpty, gateways[gateway].clientConnected else { return }
        let arrival = max(gateways[gateway].upstreamFree, now + delay())
        gateways[gateway].upstreamFree = arrival
        queue.schedule(.brokerReceives(gateway: gateway, epoch: gateways[gateway].epoch, packets: packets), at: arrival)
    }

    func trueRSSI(of name: String) -> String {
        guard let device = deviceIndex[name] else { return "" }
        return tracks[device].candidates.map { gateway in
            let position = gateways[gateway].devices.firstIndex(of: device) ?? 0
            return "\(gateways[gateway].name)=\(gateways[gateway].trueRSSI[position])"
        }.joined(separator: ",")
    }

    mutating func brokerReceives(from gateway: Int, epoch: Int, packets: [Packet]) {
        guard broker.isUp, broker.sessions[gateway] == epoch, gateways[gateway].epoch == epoch,
            gateways[gateway].connectionLive
        else { return }
        var order: [Int] = []
        var outgoing: [Int: [Delivery]] = [:]
        for packet in packets {
            switch packet {
            case .publish(let topic, let payload, let retain):
                for subscriber in broker.publish(topic: topic, payload: payload, retain: retain) {
                    if outgoing[subscriber] == nil { order.append(subscriber) }
                    outgoing[subscriber, default: []].append(Delivery(topic: topic, payload: payload, retained: false))
                }
            case .subscribe(let filter):
                let retained = broker.subscribe(gateway: gateway, filter: filter)
                if outgoing[gateway] == nil { order.append(gateway) }
                outgoing[gateway, default: []].append(
                    contentsOf: retained.map { Delivery(topic: $0.topic, payload: $0.payload, retained: true) })
            }
        }
        for subscriber in order { send(outgoing[subscriber] ?? [], to: subscriber) }
    }

    private mutating func send(_ messages: [Delivery], to subscriber: Int) {
        guard !messages.isEmpty, let epoch = broker.sessions[subscriber] else { return }
        let arrival = max(gateways[subscriber].downstreamFree, now + delay())
        gateways[subscriber].downstreamFree = arrival
        queue.schedule(.deliver(gateway: subscriber, epoch: epoch, messages: messages), at: arrival)
    }

    mutating func fireWill(of gateway: Int) {
        _ = broker.dropSession(of: gateway)
        publishWill(of: gateway)
    }

    private mutating func publishWill(of gateway: Int) {
        let topic = FleetTopics().status(of: gateways[gateway].name)
        let payload = Array(GatewayStatus.offline.rawValue.utf8)
        for subscriber in broker.publish(topic: topic, payload: payload, retain: true) {
            send([Delivery(topic: topic, payload: payload, retained: false)], to: subscriber)
        }
    }

    mutating func connectAttempt(_ gateway: Int, life: Int) {
        guard gateways[gateway].life == life, gateways[gateway].isAlive, !gateways[gateway].clientConnected else {
            return
        }
        guard broker.isUp, !gateways[gateway].partitioned else {
            queue.schedule(
                .connectAttempt(gateway: gateway, life: life), at: now + random.integer(in: scenario.reconnectPeriod))
            return
        }
        // A new connection takes over the old session: mosquitto then publishes the old connection's will.
        if broker.sessions[gateway] != nil {
            _ = broker.dropSession(of: gateway)
            publishWill(of: gateway)
        }
        gateways[gateway].epoch += 1
        gateways[gateway].connectionLive = true
        broker.connect(gateway: gateway, epoch: gateways[gateway].epoch)
        let arrival = max(gateways[gateway].downstreamFree, now + delay())
        gateways[gateway].downstreamFree = arrival
        queue.schedule(.connectionAccepted(gateway: gateway, epoch: gateways[gateway].epoch), at: arrival)
    }

    /// The connection dies: the client notices after a keep-alive, the broker after one and a half (then the will).
    private mutating func breakConnection(of gateway: Int, clientNoticesAfter: Int64, willAfter: Int64?) {
        guard gateways[gateway].connectionLive else { return }
        gateways[gateway].connectionLive = false
        let epoch = gateways[gateway].epoch
        queue.schedule(.clientNoticesLoss(gateway: gateway, epoch: epoch), at: now + clientNoticesAfter)
        if let willAfter { queue.schedule(.willDue(gateway: gateway, epoch: epoch), at: now + willAfter) }
        refreshAvailability(gateway)
    }

    mutating func partition(_ gateway: Int, until: Int64) {
        if traceDevice != nil {
            print("t=\(Double(now) / 1e9) partition \(gateways[gateway].name) until \(Double(until) / 1e9)")
        }
        report.partitions += 1
        gateways[gateway].partitioned = true
        breakConnection(of: gateway, clientNoticesAfter: scenario.keepAlive, willAfter: scenario.keepAlive * 3 / 2)
        queue.schedule(.partitionEnd(gateway: gateway), at: max(until, now + 1))
    }

    mutating func kill(_ gateway: Int, restartAt: Int64) {
        guard gateways[gateway].isAlive else { return }
        if traceDevice != nil { print("t=\(Double(now) / 1e9) kill \(gateways[gateway].name)") }
        report.kills += 1
        // A dead process polls nothing: its entitlements end now, whatever its fence said.
        for device in gateways[gateway].devices { endEntitlement(device: tracks[device].name, gateway: gateway) }
        breakConnection(of: gateway, clientNoticesAfter: 0, willAfter: scenario.keepAlive * 3 / 2)
        gateways[gateway].machine = nil
        gateways[gateway].clientConnected = false
        gateways[gateway].stopping = false
        refreshAvailability(gateway)
        queue.schedule(.restart(gateway: gateway), at: max(restartAt, now + 1))
    }

    mutating func restart(_ gateway: Int) {
        guard !gateways[gateway].isAlive else { return }
        gateways[gateway].life += 1
        var configuration = scenario.configuration(
            gateway: gateways[gateway].name, incarnation: UInt64(gateways[gateway].life))
        configuration.claimStaggerNanoseconds = SimulationScenario.second
        let local = FleetInstant(nanoseconds: gateways[gateway].clock.local(atTrue: now))
        gateways[gateway].machine = FleetGateway(
            configuration: configuration, sharedDevices: gateways[gateway].devices.map { tracks[$0].name }, at: local)
        gateways[gateway].timerGenerations = [:]
        gateways[gateway].clientConnected = false
        advertise(gateway)
        let life = gateways[gateway].life
        queue.schedule(.advertise(gateway: gateway, life: life), at: now + scenario.advertisementPeriod)
        queue.schedule(
            .connectAttempt(gateway: gateway, life: life), at: now + random.integer(in: scenario.reconnectPeriod))
    }

    mutating func stopBroker(until: Int64) {
        guard broker.isUp else { return }
        report.brokerRestarts += 1
        if traceDevice != nil { print("t=\(Double(now) / 1e9) broker stop until \(Double(until) / 1e9)") }
        broker.stop()
        for gateway in gateways.indices {
            // The broker's socket closes: clients see it at once, give or take a little; no wills.
            breakConnection(
                of: gateway,
                clientNoticesAfter: random.integer(
                    in: 1 * SimulationScenario.millisecond...500 * SimulationScenario.millisecond), willAfter: nil)
        }
        queue.schedule(.brokerStart, at: max(until, now + 1))
    }
}
