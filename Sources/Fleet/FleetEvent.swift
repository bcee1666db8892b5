/// What the binding tells the state machine. Each comes with the gateway's clock reading (``FleetInstant``).
public enum FleetEvent: Sendable {
    /// The broker accepted the connection (CONNACK) — with the will from ``FleetGateway/will`` and a clean
    /// session. Every connection starts from nothing: the state machine subscribes and republishes.
    case connected
    /// The connection is gone (either side noticed). Holding continues until the fence; nothing is published.
    case disconnected
    /// A PUBLISH from the broker, in the order the broker sent it. `retained` is the delivery's RETAIN flag.
    case received(topic: String, payload: [UInt8], retained: Bool)
    /// A timer armed by ``FleetEffect/armTimer(_:at:)`` fired. Late is fine; early or stale is harmless (the state
    /// machine re-checks every deadline against the instant it is given).
    case timerFired(FleetTimer)
    /// An advertisement of `device` heard on `adapter`.
    case observed(device: String, adapter: String, rssi: Int)
    /// A poll of a held device finished, well or not (feeds the success rate that placement scores).
    case pollCompleted(device: String, success: Bool)
    /// The daemon is stopping: hand every held device over and say `offline`.
    case stopping
}

/// The timers the state machine asks for. Arming one replaces its previous deadline.
public enum FleetTimer: Hashable, Sendable {
    case device(String)
    case reach
}
