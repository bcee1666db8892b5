import Fleet

/// One gateway host in the simulation: its clock, its process (the state machine, absent while killed), its
/// connection to the broker and the devices it can hear.
struct SimulatedGateway {
    let name: String
    let clock: DriftingClock
    /// Device indices this gateway is configured with, and the true RSSI at which it hears each.
    var devices: [Int] = []
    var trueRSSI: [Int] = []
    var machine: FleetGateway?
    /// Counts process starts: the incarnation, and a tag that makes timers of a dead process harmless.
    var life = 0
    var isAlive: Bool { machine != nil }
    /// The connection epoch (one per successful connect) and whether that connection still carries packets.
    var epoch = 0
    var connectionLive = false
    /// The state machine was told `.connected` and not yet `.disconnected`.
    var clientConnected = false
    var partitioned = false
    var stopping = false
    /// Counted as available in the devices' liveness bookkeeping.
    var available = false
    var availableSince: Int64?
    /// FIFO per direction: nothing sent later arrives earlier.
    var upstreamFree: Int64 = 0
    var downstreamFree: Int64 = 0
    var timerGenerations: [FleetTimer: Int] = [:]

    init(name: String, clock: DriftingClock) {
        self.name = name
        self.clock = clock
    }
}

/// What the simulator tracks per device to check the invariants.
struct DeviceTrack {
    let name: String
    var candidates: [Int] = []
    var bestRSSI = Int.min
    /// Entitlements as (gateway, true instant it ends); ended ones are pruned lazily.
    var holds: [(gateway: Int, until: Int64)] = []
    /// The latest end of any entitlement so far (nil: never held).
    var lastEnd: Int64?
    /// The start of the orphan episode already reported as a liveness violation (to report it once).
    var reportedOrphanSince: Int64?

    init(name: String) {
        self.name = name
    }

    func activeHolder(at now: Int64) -> Int? {
        holds.first { $0.until > now }?.gateway
    }
}

enum Packet {
    case publish(topic: String, payload: [UInt8], retain: Bool)
    case subscribe(filter: String)
}

struct Delivery {
    var topic: String
    var payload: [UInt8]
    var retained: Bool
}

enum SimulationEvent {
    case brokerReceives(gateway: Int, epoch: Int, packets: [Packet])
    case deliver(gateway: Int, epoch: Int, messages: [Delivery])
    case connectAttempt(gateway: Int, life: Int)
    case connectionAccepted(gateway: Int, epoch: Int)
    case clientNoticesLoss(gateway: Int, epoch: Int)
    case willDue(gateway: Int, epoch: Int)
    case timer(gateway: Int, life: Int, timer: FleetTimer, generation: Int)
    case advertise(gateway: Int, life: Int)
    case stop(gateway: Int)
    case kill(gateway: Int, restartAt: Int64)
    case restart(gateway: Int)
    case partitionStart(gateway: Int, until: Int64)
    case partitionEnd(gateway: Int)
    case brokerStop(until: Int64)
    case brokerStart
    case autosave
    case livenessSweep
}
