import Fleet

/// A deterministic simulation of a fleet on one broker, in the style of FoundationDB's and TigerBeetle's
/// simulation testing: one seeded random source decides topology, network delays and faults; one event queue on a
/// virtual clock runs everything; the invariants are checked at every step that could break them.
///
/// The gateways run the real ``FleetGateway`` state machine and exchange real encoded payloads through a model of
/// the broker (``SimulatedBroker``) with per-connection FIFO links, random delays, kills, partitions, broker
/// restarts (with and without persistence) and drifting clocks.
public struct FleetSimulator {
    public let scenario: SimulationScenario
    public let seed: UInt64
    var random: SimulationRandom
    var queue = EventQueue<SimulationEvent>()
    var now: Int64 = 0
    var broker = SimulatedBroker()
    var gateways: [SimulatedGateway] = []
    var tracks: [DeviceTrack] = []
    var deviceIndex: [String: Int] = [:]
    var report: SimulationReport
    let convergenceAt: Int64
    let handoverBound: Int64
    /// Prints every effect about this device (debugging a failing seed).
    public var traceDevice: String?

    public init(scenario: SimulationScenario, seed: UInt64) {
        self.scenario = scenario
        self.seed = seed
        random = SimulationRandom(seed: seed)
        report = SimulationReport(seed: seed, gateways: scenario.gateways, devices: scenario.devices)
        let rho = scenario.driftPartsPerMillion
        handoverBound = scenario.leaseNanoseconds + scenario.leaseNanoseconds / 1_000_000 * rho + scenario.pollInterval
        report.handoverBoundNanoseconds = handoverBound
        // Faults over; then a lease for the last orphans, two report periods for fresh reports, one dwell for the
        // last justified move, and a little slack for delays.
        convergenceAt =
            scenario.faultsEnd + scenario.leaseNanoseconds + 2 * scenario.reachPeriodNanoseconds
            + scenario.moveDwellNanoseconds + 10 * SimulationScenario.second
        buildTopology()
        scheduleFaults()
    }

    private mutating func buildTopology() {
        for index in 0..<scenario.gateways {
            let clock = DriftingClock(
                offsetNanoseconds: random.integer(in: 0...1_000_000_000_000_000),
                driftPartsPerMillion: random.integer(
                    in: -scenario.driftPartsPerMillion...scenario.driftPartsPerMillion))
            gateways.append(SimulatedGateway(name: "g\(index)", clock: clock))
        }
        for device in 0..<scenario.devices {
            let name = "d\(device)"
            var track = DeviceTrack(name: name)
            let count = min(
                scenario.gateways,
                random.integer(in: scenario.gatewaysPerDevice.lowerBound..<(scenario.gatewaysPerDevice.upperBound + 1)))
            while track.candidates.count < count {
                let gateway = random.integer(in: 0..<scenario.gateways)
                if !track.candidates.contains(gateway) { track.candidates.append(gateway) }
            }
            var drawn: [Int] = []
            for gateway in track.candidates {
                // Two candidates whose true RSSI differ by about the move margin are a coin toss for placement
                // (noise decides whether "better by 10 dB" holds); such pairs are kept out so that "no moves after
                // convergence" is a sharp invariant. The general no-ping-pong property is argued in FLEET.md.
                var rssi = Int(random.integer(in: -95 ... -45))
                let guardBand = 2 * scenario.rssiNoise + 1
                while drawn.contains(where: { abs(abs($0 - rssi) - 10) <= guardBand }) {
                    rssi = Int(random.integer(in: -95 ... -45))
                }
                drawn.append(rssi)
                gateways[gateway].devices.append(device)
                gateways[gateway].trueRSSI.append(rssi)
                track.bestRSSI = max(track.bestRSSI, rssi)
            }
            deviceIndex[name] = device
            tracks.append(track)
        }
        for gateway in 0..<scenario.gateways {
            queue.schedule(.restart(gateway: gateway), at: random.integer(in: 0...500 * SimulationScenario.millisecond))
        }
        queue.schedule(.livenessSweep, at: 5 * SimulationScenario.second)
        queue.schedule(.autosave, at: scenario.autosavePeriod)
    }

    private mutating func scheduleFaults() {
        let window = scenario.faultsStart...max(scenario.faultsStart, scenario.faultsEnd - 1)
        let second = SimulationScenario.second
        for _ in 0..<scenario.kills {
            let gateway = random.integer(in: 0..<scenario.gateways)
            let at = random.integer(in: window)
            let restartAt = min(at + random.integer(in: 20 * second...120 * second), scenario.faultsEnd)
            // Half the kills are clean stops (the daemon hands its devices over first), half are crashes.
            if random.chance(permille: 500) {
                queue.schedule(.stop(gateway: gateway), at: at)
                queue.schedule(.kill(gateway: gateway, restartAt: restartAt), at: at + second)
            } else {
                queue.schedule(.kill(gateway: gateway, restartAt: restartAt), at: at)
            }
        }
        for _ in 0..<scenario.partitions {
            let gateway = random.integer(in: 0..<scenario.gateways)
            let at = random.integer(in: window)
            let until = min(at + random.integer(in: 2 * second...90 * second), scenario.faultsEnd)
            queue.schedule(.partitionStart(gateway: gateway, until: until), at: at)
        }
        for _ in 0..<scenario.brokerRestarts {
            let at = random.integer(in: window)
            queue.schedule(
                .brokerStop(until: min(at + random.integer(in: 1 * second...20 * second), scenario.faultsEnd)), at: at)
        }
    }

    /// Runs to the scenario's end and returns what it saw. Deterministic: the same seed gives the same report.
    public mutating func run() -> SimulationReport {
        while let (time, event) = queue.pop(), time <= scenario.duration {
            now = time
            report.steps += 1
            step(event)
        }
        now = scenario.duration
        finalChecks()
        return report
    }

    private mutating func step(_ event: SimulationEvent) {
        switch event {
        case .brokerReceives(let gateway, let epoch, let packets):
            brokerReceives(from: gateway, epoch: epoch, packets: packets)
        case .deliver(let gateway, let epoch, let messages):
            guard gateways[gateway].isAlive, gateways[gateway].epoch == epoch, gateways[gateway].connectionLive else {
                return
            }
            for message in messages {
                run(gateway, .received(topic: message.topic, payload: message.payload, retained: message.retained))
            }
        case .connectAttempt(let gateway, let life): connectAttempt(gateway, life: life)
        case .connectionAccepted(let gateway, let epoch):
            guard gateways[gateway].isAlive, gateways[gateway].epoch == epoch, gateways[gateway].connectionLive else {
                return
            }
            gateways[gateway].clientConnected = true
            run(gateway, .connected)
            refreshAvailability(gateway)
        case .clientNoticesLoss(let gateway, let epoch):
            guard gateways[gateway].isAlive, gateways[gateway].epoch == epoch, gateways[gateway].clientConnected else {
                return
            }
            gateways[gateway].clientConnected = false
            run(gateway, .disconnected)
            refreshAvailability(gateway)
            queue.schedule(
                .connectAttempt(gateway: gateway, life: gateways[gateway].life),
                at: now + random.integer(in: scenario.reconnectPeriod))
        case .willDue(let gateway, let epoch):
            guard broker.sessions[gateway] == epoch else { return }
            fireWill(of: gateway)
        case .timer(let gateway, let life, let timer, let generation):
            guard gateways[gateway].life == life, gateways[gateway].isAlive,
                gateways[gateway].timerGenerations[timer] == generation
            else { return }
            run(gateway, .timerFired(timer))
        case .advertise(let gateway, let life):
            guard gateways[gateway].life == life, gateways[gateway].isAlive else { return }
            advertise(gateway)
            queue.schedule(.advertise(gateway: gateway, life: life), at: now + scenario.advertisementPeriod)
        case .stop(let gateway):
            guard gateways[gateway].isAlive else { return }
            gateways[gateway].stopping = true
            run(gateway, .stopping)
        case .kill(let gateway, let restartAt): kill(gateway, restartAt: restartAt)
        case .restart(let gateway): restart(gateway)
        case .partitionStart(let gateway, let until): partition(gateway, until: until)
        case .partitionEnd(let gateway): gateways[gateway].partitioned = false
        case .brokerStop(let until): stopBroker(until: until)
        case .brokerStart: broker.start(persistence: scenario.persistence)
        case .autosave:
            broker.autosave()
            queue.schedule(.autosave, at: now + scenario.autosavePeriod)
        case .livenessSweep:
            sweepLiveness()
            queue.schedule(.livenessSweep, at: now + 5 * SimulationScenario.second)
        }
    }

    /// Hands one event to a gateway's state machine at its own clock's reading, and carries out the effects.
    mutating func run(_ gateway: Int, _ event: FleetEvent) {
        guard var machine = gateways[gateway].machine else { return }
        // Taken out of the array while it runs, so its storage is uniquely referenced and mutates in place.
        gateways[gateway].machine = nil
        let local = FleetInstant(nanoseconds: gateways[gateway].clock.local(atTrue: now))
        let effects = machine.handle(event, at: local)
        gateways[gateway].machine = machine
        perform(effects, of: gateway)
    }

    mutating func advertise(_ gateway: Int) {
        let devices = gateways[gateway].devices
        for (position, device) in devices.enumerated() {
            let noise = scenario.rssiNoise
            let rssi = gateways[gateway].trueRSSI[position] + random.integer(in: -noise..<(noise + 1))
            run(gateway, .observed(device: tracks[device].name, adapter: "hci0", rssi: rssi))
        }
    }
}
