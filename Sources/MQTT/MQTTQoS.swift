/// The quality of service of a publish or subscription.
public enum MQTTQoS: UInt8, Sendable, Hashable, CaseIterable {
    /// Written to the socket once; no acknowledgement.
    case atMostOnce = 0
    /// Acknowledged by PUBACK; may arrive more than once.
    case atLeastOnce = 1
    /// Acknowledged by PUBREC/PUBREL/PUBCOMP; arrives once.
    case exactlyOnce = 2
}
