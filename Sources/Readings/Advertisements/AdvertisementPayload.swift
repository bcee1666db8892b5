/// What one advertisement said: its readings and what the format tells about the packet itself.
///
/// ```swift
/// let payload = try decoder.decode(bytes, from: .bthome, address: address, key: key, replayGuard: &replay)
/// for reading in payload.readings { print(reading) }  // temperature 25.06 °C, humidity 50.55 %
/// ```
public struct AdvertisementPayload: Sendable, Hashable {
    /// The format the bytes were in.
    public var format: AdvertisementFormat
    /// The readings, in the order of the bytes, named and united as the GATT readings are (`temperature` in °C,
    /// `humidity` in %, `battery` in %, `voltage` in V, `pressure` in hPa, `illuminance` in lx). Names are unique:
    /// when a kind occurs more than once (a BTHome device with three thermometers), each occurrence is numbered
    /// in order: `temperature_1`, `temperature_2`, `temperature_3`.
    public var readings: [Reading]
    /// The number the device gives a measurement, the same in every repeat of one advertisement, for the caller
    /// to drop duplicates: BTHome's packet id (object 0x00), pvvx's and ATC1441's measurement count, MiBeacon's
    /// frame counter, Ruuvi's measurement sequence. `nil` when the advertisement has none.
    public var packetID: UInt32?
    /// The encryption counter of an encrypted advertisement that authenticated and passed the ``ReplayGuard``;
    /// `nil` for plain ones.
    public var counter: UInt32?
    /// Whether the advertisement was encrypted (and so authenticated with the device's key).
    public var isEncrypted: Bool
    /// Whether ``counter`` equals the last accepted one: the device sending the same advertisement again.
    public var isRepeat: Bool
    /// The device's address as the advertisement carries it (pvvx, ATC1441, Ruuvi, and MiBeacon and BTHome when
    /// they include it), which may differ from the address it was received from when the device uses a random
    /// address. `nil` when not carried, or carried as "not available".
    public var advertisedAddress: BluetoothAddress?
    /// BTHome's "trigger based device" flag: the device advertises on events (a button, a door), not at regular
    /// intervals, so silence does not mean it is gone.
    public var isTriggerBased: Bool
    /// MiBeacon's product id (0x055B is the LYWSD03MMC, 0x01AA the LYWSDCGQ, 0x0098 the Mi Flora).
    public var productID: UInt16?
    /// Problems that did not stop the decoding: an unknown MiBeacon object skipped, a BTHome object id unknown or
    /// truncated after which the rest of the bytes could not be read (the readings before it are kept, as BTHome
    /// intends: objects come in ascending id order so that newer ids come last). Empty when every byte was used.
    public var issues: [AdvertisementError]

    /// Creates a payload.
    public init(
        format: AdvertisementFormat,
        readings: [Reading],
        packetID: UInt32? = nil,
        counter: UInt32? = nil,
        isEncrypted: Bool = false,
        isRepeat: Bool = false,
        advertisedAddress: BluetoothAddress? = nil,
        isTriggerBased: Bool = false,
        productID: UInt16? = nil,
        issues: [AdvertisementError] = []
    ) {
        self.format = format
        self.readings = readings
        self.packetID = packetID
        self.counter = counter
        self.isEncrypted = isEncrypted
        self.isRepeat = isRepeat
        self.advertisedAddress = advertisedAddress
        self.isTriggerBased = isTriggerBased
        self.productID = productID
        self.issues = issues
    }
}
