/// The advertisement formats this module decodes.
///
/// Each is claimed by where its bytes travel (``AdvertisementSource``): BTHome, pvvx and ATC1441, and MiBeacon in
/// service data under their 16-bit UUIDs, RuuviTag in manufacturer data under Ruuvi's company identifier.
public enum AdvertisementFormat: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// BTHome v2 (bthome.io), service data 0xFCD2, plain or AES-CCM encrypted.
    case bthome
    /// pvvx's custom format (ATC_MiThermometer firmware), service data 0x181A, 15 bytes, little endian.
    case pvvx
    /// atc1441's format (the first custom LYWSD03MMC firmware), service data 0x181A, 13 bytes, big endian.
    case atc1441
    /// Xiaomi MiBeacon versions 2 to 5, service data 0xFE95, plain or (4 and 5) AES-CCM encrypted.
    case mibeacon
    /// RuuviTag data format 5 (RAWv2), manufacturer data 0x0499.
    case ruuviRAWv2 = "ruuvi_rawv2"

    /// The name people use for the format, in messages.
    public var displayName: String {
        switch self {
        case .bthome: "BTHome"
        case .pvvx: "pvvx"
        case .atc1441: "ATC1441"
        case .mibeacon: "MiBeacon"
        case .ruuviRAWv2: "Ruuvi RAWv2"
        }
    }

    public var description: String { rawValue }
}

/// Where an advertisement's bytes came from: the AD structure and its key, as BlueZ reports them in a device's
/// `ServiceData` (16-bit UUID → bytes after the UUID) and `ManufacturerData` (company → bytes after the company
/// identifier) properties.
public enum AdvertisementSource: Sendable, Hashable, CustomStringConvertible {
    /// Service Data - 16-bit UUID (AD type 0x16); the bytes start after the UUID.
    case serviceData(uuid16: UInt16)
    /// Manufacturer Specific Data (AD type 0xFF); the bytes start after the company identifier.
    case manufacturerData(companyID: UInt16)

    /// BTHome v2's service UUID (assigned to Allterco Robotics for BTHome).
    public static let bthome = AdvertisementSource.serviceData(uuid16: 0xFCD2)
    /// The Environmental Sensing service UUID, which pvvx's and atc1441's formats borrow.
    public static let environmentalSensing = AdvertisementSource.serviceData(uuid16: 0x181A)
    /// Xiaomi's service UUID (Xiaomi Inc.), MiBeacon.
    public static let mibeacon = AdvertisementSource.serviceData(uuid16: 0xFE95)
    /// Ruuvi Innovations' company identifier.
    public static let ruuvi = AdvertisementSource.manufacturerData(companyID: 0x0499)

    public var description: String {
        switch self {
        case .serviceData(let uuid16): "service data \(HexText.number(UInt64(uuid16), digits: 4))"
        case .manufacturerData(let companyID): "manufacturer data \(HexText.number(UInt64(companyID), digits: 4))"
        }
    }
}
