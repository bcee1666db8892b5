/// A command received over MQTT, parsed and checked, for the daemon to carry out.
///
/// `device` is the name as configured (not the sanitised topic level).
public enum BridgeCommand: Sendable, Hashable {
    /// `<prefix>/<gateway>/<device>/poll`: poll the device now, outside its schedule.
    case pollNow(device: String)
    /// `<prefix>/<gateway>/<device>/interval/set`: poll every `interval` from now on. The daemon answers with
    /// ``MQTTBridge/intervalChanged(device:to:)`` carrying the value it actually uses.
    case setInterval(device: String, Duration)
}
