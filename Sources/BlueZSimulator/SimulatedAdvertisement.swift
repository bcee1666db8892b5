import Readings

// Passive sensors: devices whose readings are in their advertisements (BTHome, pvvx, MiBeacon, Ruuvi), and the
// fixed set `keepalive simulate --adverts` and the tests use.

/// What a passive sensor advertises and how often. While its adapter discovers, the device sends one advertisement
/// every `interval` (scaled by `Configuration.timeScale`); every `repeats` advertisements carry a new measurement,
/// with a new packet id and (encrypted kinds) a new counter, and the repeats in between carry the same bytes.
///
/// ```swift
/// SimulatedDevice(address: "C0:FF:EE:02:00:01", advertisement: SimulatedAdvertisement(kind: .bthome))
/// ```
public struct SimulatedAdvertisement: Sendable {
    /// The advertisement formats, named as configurations name them.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// BTHome v2, plain (service data 0xFCD2).
        case bthome
        /// BTHome v2, AES-CCM encrypted with the device's key.
        case bthomeEncrypted = "bthome-encrypted"
        /// pvvx's custom format (service data 0x181A, 15 bytes).
        case pvvx
        /// MiBeacon v5, encrypted with the bind key (service data 0xFE95, a LYWSD03MMC).
        case mibeacon
        /// RuuviTag RAWv2 (manufacturer data 0x0499, format 5).
        case ruuvi

        /// Whether the kind needs a 16-byte key.
        public var isEncrypted: Bool { self == .bthomeEncrypted || self == .mibeacon }

        /// How people name the format.
        public var formatName: String {
            switch self {
            case .bthome: "BTHome v2"
            case .bthomeEncrypted: "BTHome v2, encrypted"
            case .pvvx: "pvvx custom"
            case .mibeacon: "MiBeacon v5, encrypted (LYWSD03MMC)"
            case .ruuvi: "RuuviTag RAWv2"
            }
        }
    }

    public var kind: Kind
    /// The AES-128 key of an encrypted kind (BTHome's encryption key, Xiaomi's bind key): 16 bytes.
    public var key: [UInt8]?
    /// One advertisement per interval, scaled by `Configuration.timeScale`.
    public var interval: Duration
    /// Advertisements per measurement: the first of them carries a new measurement, the others repeat it.
    public var repeats: Int
    /// The readings of measurement 0; later ones drift from them (`measurement(_:)`).
    public var base: SimulatedMeasurement

    public init(
        kind: Kind, key: [UInt8]? = nil, interval: Duration = .seconds(1), repeats: Int = 3,
        base: SimulatedMeasurement = SimulatedMeasurement()
    ) {
        self.kind = kind
        self.key = key
        self.interval = interval
        self.repeats = max(1, repeats)
        self.base = base
    }

    /// The key as 32 lower-case hexadecimal digits, as a configuration writes it.
    public var keyHex: String? { key.map(AdvertisementEncoder.hex) }

    /// Measurement `index`: the temperature drifts up and down by up to 1 °C (0.05 °C a step, 40 steps a cycle),
    /// the humidity by up to 2 % (0.25 % a step, 16 steps a cycle), the rest stays.
    public func measurement(_ index: UInt64) -> SimulatedMeasurement {
        func triangle(_ period: UInt64) -> Double {
            let phase = index % period
            return Double(phase < period / 2 ? phase : period - phase)
        }
        var measurement = base
        measurement.celsius = base.celsius + triangle(40) * 0.05
        measurement.humidity = base.humidity + triangle(16) * 0.25
        measurement.movements = base.movements &+ UInt8(truncatingIfNeeded: index / 10)
        return measurement
    }

    /// What advertisement number `sequence` (from 0) carries: measurement `sequence / repeats`, whose number is its
    /// packet id and counter.
    func packet(_ sequence: UInt64, address: [UInt8]) throws(AESCCMError) -> AdvertisedPacket {
        let index = sequence / UInt64(repeats)
        let measurement = measurement(index)
        let counter = UInt32(truncatingIfNeeded: index)
        switch kind {
        case .bthome:
            return .serviceData(
                AdvertisementEncoder.bthomeUUID,
                AdvertisementEncoder.bthome(measurement, packetID: UInt8(truncatingIfNeeded: index)))
        case .bthomeEncrypted:
            return .serviceData(
                AdvertisementEncoder.bthomeUUID,
                try AdvertisementEncoder.bthomeEncrypted(
                    measurement, packetID: UInt8(truncatingIfNeeded: index), counter: counter, key: key ?? [],
                    address: address))
        case .pvvx:
            return .serviceData(
                AdvertisementEncoder.pvvxUUID,
                AdvertisementEncoder.pvvx(measurement, count: UInt8(truncatingIfNeeded: index), address: address))
        case .mibeacon:
            return .serviceData(
                AdvertisementEncoder.miBeaconUUID,
                try AdvertisementEncoder.miBeacon(measurement, counter: counter, key: key ?? [], address: address))
        case .ruuvi:
            return .manufacturerData(
                AdvertisementEncoder.ruuviCompanyID,
                AdvertisementEncoder.ruuviRAWv2(
                    measurement, sequence: UInt16(truncatingIfNeeded: index), address: address))
        }
    }
}

/// One advertisement's data element, as BlueZ keys it in `ServiceData` or `ManufacturerData`.
enum AdvertisedPacket: Sendable, Hashable {
    case serviceData(String, [UInt8])
    case manufacturerData(UInt16, [UInt8])
}

extension SimulatedDevice {
    /// A passive sensor of `kind` that bluetoothd does not know before it is discovered. Encrypted kinds need
    /// `key` (16 bytes).
    public static func advertiser(
        _ kind: SimulatedAdvertisement.Kind, address: String, name: String? = nil, key: [UInt8]? = nil,
        adapter: String = "hci0", rssi: Int16 = -62, interval: Duration = .seconds(1), repeats: Int = 3,
        base: SimulatedMeasurement = SimulatedMeasurement()
    ) -> SimulatedDevice {
        SimulatedDevice(
            address: address, addressType: kind == .mibeacon ? .public : .random, name: name, adapter: adapter,
            rssi: rssi, cached: false,
            advertisement: SimulatedAdvertisement(
                kind: kind, key: key, interval: interval, repeats: repeats, base: base))
    }

    /// The addresses of `[SimulatedDevice].advertisingSensors`, outside the ranges of `.sensors(count:)` and
    /// `.profileSensors()`.
    public enum AdvertiserAddress {
        public static let bthome = "C0:FF:EE:02:00:01"
        public static let bthomeEncrypted = "C0:FF:EE:02:00:02"
        public static let pvvx = "C0:FF:EE:02:00:03"
        public static let mibeacon = "C0:FF:EE:02:00:04"
        public static let ruuvi = "C0:FF:EE:02:00:05"
    }

    /// The keys of `[SimulatedDevice].advertisingSensors`, as 32 hexadecimal digits. BTHome's is the example key of
    /// bthome.io's encryption page.
    public enum AdvertiserKey {
        public static let bthomeEncrypted = "231d39c1d7cc1ab1aee224cd096db932"
        public static let mibeacon = "b853075158487ca39a5b5ea9cd8e6b2f"
    }
}

extension Array where Element == SimulatedDevice {
    /// One passive sensor of each kind, advertising every `interval` (scaled) while the adapter discovers:
    ///
    /// | address | name | format | key | measurement 0 |
    /// |---|---|---|---|---|
    /// | C0:FF:EE:02:00:01 | BTHome-Sim | BTHome v2 | – | 21.5 °C, 45.5 %, 88 %, 2.95 V |
    /// | C0:FF:EE:02:00:02 | BTHome-Enc | BTHome v2, encrypted | 231d39c1d7cc1ab1aee224cd096db932 | 19.25 °C, 52 % |
    /// | C0:FF:EE:02:00:03 | ATC_020003 | pvvx custom | – | 23.1 °C, 40.25 %, 2.95 V |
    /// | C0:FF:EE:02:00:04 | LYWSD03MMC | MiBeacon v5, encrypted | b853075158487ca39a5b5ea9cd8e6b2f | 22.4 °C, 48 % |
    /// | C0:FF:EE:02:00:05 | Ruuvi 0005 | RuuviTag RAWv2 | – | 4.5 °C, 80 %, 1002.5 hPa |
    ///
    /// The temperature then drifts by up to 1 °C and the humidity by up to 2 % (`SimulatedAdvertisement.measurement`);
    /// every `repeats` advertisements bring a new measurement.
    public static func advertisingSensors(
        adapter: String = "hci0", interval: Duration = .seconds(1), repeats: Int = 3
    ) -> [SimulatedDevice] {
        typealias Address = SimulatedDevice.AdvertiserAddress
        typealias Key = SimulatedDevice.AdvertiserKey
        func make(
            _ kind: SimulatedAdvertisement.Kind, _ address: String, _ name: String, key: String? = nil, rssi: Int16,
            _ base: SimulatedMeasurement
        ) -> SimulatedDevice {
            .advertiser(
                kind, address: address, name: name, key: key.flatMap(AdvertisementEncoder.keyBytes), adapter: adapter,
                rssi: rssi, interval: interval, repeats: repeats, base: base)
        }
        return [
            make(.bthome, Address.bthome, "BTHome-Sim", rssi: -58, SimulatedMeasurement()),
            make(
                .bthomeEncrypted, Address.bthomeEncrypted, "BTHome-Enc", key: Key.bthomeEncrypted, rssi: -64,
                SimulatedMeasurement(celsius: 19.25, humidity: 52, battery: 76, millivolts: 2_870)),
            make(
                .pvvx, Address.pvvx, "ATC_020003", rssi: -70,
                SimulatedMeasurement(celsius: 23.1, humidity: 40.25, battery: 91, millivolts: 2_950)),
            make(
                .mibeacon, Address.mibeacon, "LYWSD03MMC", key: Key.mibeacon, rssi: -67,
                SimulatedMeasurement(celsius: 22.4, humidity: 48)),
            make(
                .ruuvi, Address.ruuvi, "Ruuvi 0005", rssi: -75,
                SimulatedMeasurement(celsius: 4.5, humidity: 80, battery: 100, millivolts: 2_977, pressure: 1_002.5)),
        ]
    }

    /// `count` passive sensors nobody configured, with random static addresses and (encrypted kinds) random keys,
    /// cycling through `kinds`; all deterministic for one `seed`. For benchmarks of a busy neighbourhood: `interval`
    /// is each device's own, so the total is `count / interval` advertisements per (scaled) second.
    public static func randomAdvertisers(
        count: Int, seed: UInt64 = 1, adapter: String = "hci0", interval: Duration = .seconds(2),
        repeats: Int = 3, kinds: [SimulatedAdvertisement.Kind] = SimulatedAdvertisement.Kind.allCases,
        excluding taken: Set<String> = []
    ) -> [SimulatedDevice] {
        var generator = SplitMix64(seed: seed)
        var seen = taken
        var devices: [SimulatedDevice] = []
        devices.reserveCapacity(count)
        let kinds = kinds.isEmpty ? SimulatedAdvertisement.Kind.allCases : kinds
        while devices.count < count {
            let bits = generator.next()
            // A random static address: the two top bits set; never the simulator's own C0:FF:EE range.
            var bytes = (0..<6).map { UInt8(truncatingIfNeeded: bits >> (8 * UInt64($0))) }
            bytes[0] |= 0xC0
            if bytes[0] == 0xC0, bytes[1] == 0xFF, bytes[2] == 0xEE { continue }
            let address = bytes.map(Hex.byte).joined(separator: ":")
            guard seen.insert(address).inserted else { continue }
            let kind = kinds[devices.count % kinds.count]
            var key: [UInt8]?
            if kind.isEncrypted {
                let high = generator.next()
                let low = generator.next()
                key = (0..<16).map { UInt8(truncatingIfNeeded: ($0 < 8 ? high : low) >> (8 * UInt64($0 % 8))) }
            }
            let variation = generator.next()
            let base = SimulatedMeasurement(
                celsius: 15 + Double(variation % 150) / 10, humidity: 30 + Double((variation >> 8) % 400) / 10,
                battery: UInt8(40 + (variation >> 16) % 60))
            devices.append(
                .advertiser(
                    kind, address: address, key: key, adapter: adapter, rssi: -50 - Int16((variation >> 24) % 45),
                    interval: interval, repeats: repeats, base: base))
        }
        return devices
    }
}

/// A small seeded generator (SplitMix64): the same devices for the same seed.
struct SplitMix64 {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var value = state
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }
}
