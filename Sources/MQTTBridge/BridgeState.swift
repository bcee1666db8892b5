import MQTT

/// The bridge's mutable state, changed under one lock; what it decides is published after the lock is released.
struct BridgeState {
    /// One configured device and what the bridge knows of it.
    struct DeviceState {
        var device: BridgeDevice
        var availability: AvailabilityTracker
        var interval: Duration
        /// Expected readings first, then readings as records brought them.
        var readings: [BridgeDevice.ExpectedReading]
        var softwareVersion: String?
        var hardwareVersion: String?
        /// The consecutive failures last queued for publishing (nil: none yet).
        var publishedFailures: Int?
        /// For a shared device: whether this gateway holds it now (only the holder announces it).
        var holding = false
        /// Heard through advertisements: configured so, or learned from a record (``MQTTBridge/submit``).
        var passive = false
        /// The packet id of the last advertisement record, to publish each event once (a device repeats a packet).
        var lastPacketID: UInt32?

        /// Whether this gateway announces the device to Home Assistant now.
        var announced: Bool { !device.shared || holding }
    }

    /// Work for the run loop, in order.
    enum Outgoing: Sendable, Hashable {
        case message(MQTTOutgoingMessage)
        /// Discovery configs of one device, by name.
        case announce(device: String)
        /// Everything a fresh connection needs: status, subscriptions, discovery, retained device topics.
        case connected
        /// HA came back: discovery of everything again.
        case announceAll
    }

    var devices: [String: DeviceState] = [:]
    /// Answers to rejected commands, limited per device and per gateway.
    var answers = AnswerLimiter()
    /// Device name by sanitised topic level, to route commands.
    var deviceByLevel: [String: String] = [:]
    var outgoing: [Outgoing] = []
    var connected = false
    /// The client while ``MQTTBridge/run()`` runs: `submit` hands a record straight to it when nothing else is
    /// pending or queued.
    var client: MQTTClient?
    /// Records `submit` handed straight to the client so far (the rest went through the delivery task).
    var handedDirectly: UInt64 = 0
    /// The delivery task is publishing an item it took off ``outgoing`` (which may then look empty): records wait
    /// for it rather than overtake it.
    var flushing = false
    var announced = AnnouncedState()
    /// The dropped count last published (nil: never this run).
    var publishedDropped: UInt64?
    /// The daemon's last health line, published retained (again after each connection).
    var health: String?
    /// The most records handed to the client in one delivery batch so far (at most the delivery window).
    var largestDeliveryBatch = 0

    /// Appends `item` unless an equal one is already waiting (a burst of HA `online` needs one re-announce).
    /// Messages are not queued while disconnected: they are retained state, which the next connection
    /// republishes whole (``Outgoing/connected``), so a long outage does not grow the queue.
    mutating func enqueue(_ item: Outgoing) {
        if case .message = item {
            if connected { outgoing.append(item) }
        } else if !outgoing.contains(item) {
            outgoing.append(item)
        }
    }
}
