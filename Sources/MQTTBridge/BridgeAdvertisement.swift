/// What the bridge needs to know of a record that came from an advertisement rather than from a poll: that the
/// device is passive (heard, not connected to), and whether the packet is one already seen, so that an event in it
/// (a button press) is published once, not once per repetition.
///
/// Devices send each advertisement many times (BTHome and MiBeacon repeat one packet, with one packet id or frame
/// counter, until the next measurement or event).
public struct BridgeAdvertisement: Sendable, Hashable {
    /// The packet id (BTHome's object 0x00, MiBeacon's frame counter, pvvx's measurement count): a record with the
    /// same id as the device's previous one is the same packet again. `nil` when the format has none.
    public var packetID: UInt32?
    /// The decoder already knows it is a repetition (an encrypted packet with the counter of the last one).
    public var isRepeat: Bool

    public init(packetID: UInt32? = nil, isRepeat: Bool = false) {
        self.packetID = packetID
        self.isRepeat = isRepeat
    }
}
