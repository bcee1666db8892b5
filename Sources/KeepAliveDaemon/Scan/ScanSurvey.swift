public import Polling
public import Readings
import Basics

/// What `keepalive scan` heard: every device once, its advertisements merged (the newest name, signal, services
/// and the newest data under each service UUID and company identifier), and how often it was heard.
///
/// ```swift
/// let survey = ScanSurvey()
/// try await survey.listen(to: transport, on: "hci0", for: .seconds(10))
/// for device in survey.devices { print(device.advertisement.peripheral, ScanDecoding.decode(device.advertisement)) }
/// ```
public final class ScanSurvey: Sendable {
    /// One device as heard so far.
    public struct Device: Sendable, Hashable {
        /// Its advertisements merged into one.
        public var advertisement: Advertisement
        /// How many advertisements (or property changes) were heard.
        public var sightings: Int
    }

    private let heard = Locked<[String: Device]>([:])

    public init() {}

    /// Merges one sighting into the device it came from.
    public func record(_ advertisement: Advertisement) {
        heard.withLock { heard in
            let key = advertisement.peripheral.description
            guard var device = heard[key] else {
                heard[key] = Device(advertisement: advertisement, sightings: 1)
                return
            }
            device.advertisement.rssi = advertisement.rssi ?? device.advertisement.rssi
            device.advertisement.name = advertisement.name ?? device.advertisement.name
            if !advertisement.serviceUUIDs.isEmpty { device.advertisement.serviceUUIDs = advertisement.serviceUUIDs }
            // Devices alternate advertisements (a BTHome packet, then a MiBeacon one): keep the newest of each.
            device.advertisement.manufacturerData.merge(advertisement.manufacturerData) { $1 }
            device.advertisement.serviceData.merge(advertisement.serviceData) { $1 }
            device.sightings += 1
            heard[key] = device
        }
    }

    /// The devices, strongest signal first (then by address).
    public var devices: [Device] {
        heard.withLock { Array($0.values) }
            .sorted { first, second in
                let (a, b) = (first.advertisement.rssi ?? -128, second.advertisement.rssi ?? -128)
                return a != b ? a > b : first.advertisement.peripheral.address < second.advertisement.peripheral.address
            }
    }

    /// Discovers on `adapter` for `duration` (every advertisement, duplicates too: a sensor's readings change
    /// without its name or services changing), recording each sighting and handing it to `each`. Returns when
    /// the time is up; throws when discovery fails first.
    public func listen(
        to transport: any PeripheralTransport, on adapter: String, for duration: Duration,
        each: @escaping @Sendable (Advertisement) -> Void = { _ in }
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for try await advertisement in transport.discover(
                    on: adapter, filter: DiscoveryFilter(duplicateData: true))
                {
                    self.record(advertisement)
                    each(advertisement)
                }
            }
            group.addTask { try await Task.sleep(for: duration) }
            // The time ends the scan; a discovery that fails (StartDiscovery refused, the adapter gone) ends it
            // sooner, and its error is thrown.
            defer { group.cancelAll() }
            try await group.next()
        }
    }
}

/// One advertisement element that a decoder of ``Readings`` claims (BTHome, pvvx, ATC1441, MiBeacon, Ruuvi), and
/// what became of it.
public struct HeardPayload: Sendable, Hashable {
    public enum Outcome: Sendable, Hashable {
        /// Decoded (maybe to no readings: a MiBeacon that only says the device is there).
        case readings([Reading])
        /// Encrypted, and no key was given for the device.
        case keyNeeded
        /// Could not be decoded: a wrong key, a truncated or unknown variant, …
        case failed(AdvertisementError)
    }

    public var format: AdvertisementFormat
    public var outcome: Outcome
    /// Whether the advertisement is encrypted (read from its header, so known without a key too).
    public var isEncrypted: Bool
    /// MiBeacon's product id (read from its header, so known for an encrypted one too).
    public var productID: UInt16?

    public init(format: AdvertisementFormat, outcome: Outcome, isEncrypted: Bool = false, productID: UInt16? = nil) {
        self.format = format
        self.outcome = outcome
        self.isEncrypted = isEncrypted
        self.productID = productID
    }
}

/// The decoding half of `keepalive scan`: advertisements to ``HeardPayload``s, and those to text and JSON. Pure.
public enum ScanDecoding {
    /// The payloads of `advertisement` a decoder claims, in the order of ``AdvertisementFormat/allCases``.
    /// - Parameters:
    ///   - decoder: decrypts encrypted ones when it has a cipher and `keys` a key for the device.
    ///   - keys: address (upper case) → key.
    public static func decode(
        _ advertisement: Advertisement, decoder: AdvertisementDecoder = AdvertisementDecoder(),
        keys: [String: AdvertisementKey] = [:]
    ) -> [HeardPayload] {
        var elements: [(AdvertisementSource, [UInt8])] = []
        for (uuid, bytes) in advertisement.serviceData {
            guard let number = uuid.assignedNumber else { continue }
            elements.append((.serviceData(uuid16: number), bytes))
        }
        for (company, bytes) in advertisement.manufacturerData {
            elements.append((.manufacturerData(companyID: company), bytes))
        }
        let address = try? BluetoothAddress(parsing: advertisement.peripheral.address)
        var payloads: [HeardPayload] = []
        for (source, bytes) in elements {
            guard let format = AdvertisementDecoder.format(of: source, bytes: bytes), let address else { continue }
            let header = Self.header(format, bytes)
            var heard = HeardPayload(
                format: format, outcome: .readings([]), isEncrypted: header.encrypted, productID: header.productID)
            var replay = ReplayGuard()
            do throws(AdvertisementError) {
                let payload = try decoder.decode(
                    bytes, from: source, address: address, key: keys[advertisement.peripheral.address],
                    replayGuard: &replay)
                heard.outcome = .readings(payload.readings)
                heard.isEncrypted = payload.isEncrypted
                heard.productID = payload.productID ?? heard.productID
            } catch  where error.code == .keyRequired {
                heard.outcome = .keyNeeded
            } catch {
                heard.outcome = .failed(error)
            }
            payloads.append(heard)
        }
        func rank(_ format: AdvertisementFormat) -> Int { AdvertisementFormat.allCases.firstIndex(of: format) ?? 0 }
        return payloads.sorted { rank($0.format) < rank($1.format) }
    }

    /// Whether the payload is encrypted and (MiBeacon) its product id, from the header alone: BTHome's device
    /// information byte (bit 0), MiBeacon's frame control (bit 3) and product id.
    static func header(_ format: AdvertisementFormat, _ bytes: [UInt8]) -> (encrypted: Bool, productID: UInt16?) {
        switch format {
        case .bthome:
            return (bytes.first.map { $0 & 0x01 != 0 } ?? false, nil)
        case .mibeacon:
            guard bytes.count >= 4 else { return (false, nil) }
            return (bytes[0] & 0x08 != 0, UInt16(bytes[2]) | UInt16(bytes[3]) << 8)
        case .pvvx, .atc1441, .ruuviRAWv2:
            return (false, nil)
        }
    }

    /// `BTHome: temperature 21.3 °C, humidity 45 %, battery 93 %`; `BTHome (encrypted: key needed)`,
    /// `MiBeacon (encrypted: bind key needed)`; `pvvx: not decoded (truncated)`.
    public static func line(_ payload: HeardPayload) -> String {
        let name = payload.format.displayName
        switch payload.outcome {
        case .readings(let readings):
            let label = name + (payload.isEncrypted ? " (encrypted)" : "")
            guard !readings.isEmpty else { return "\(label): no readings in this advertisement" }
            return "\(label): " + readings.map { JSONText.printable($0.description) }.joined(separator: ", ")
        case .keyNeeded:
            return "\(name) (encrypted: \(payload.format == .mibeacon ? "bind key" : "key") needed)"
        case .failed(let error) where error.code == .authenticationFailed:
            return "\(name) (encrypted: the key given does not verify)"
        case .failed(let error):
            return "\(name): not decoded (\(error.code))"
        }
    }

    /// The payloads as a JSON array: `[{"format":"bthome","encrypted":false,"readings":{"temperature":
    /// {"value":21.3,"unit":"°C"}}}]`; one that needs a key has `"key_needed":true` and no readings, one that
    /// failed an `"error"`. MiBeacon's has its `"product_id"`.
    public static func json(_ payloads: [HeardPayload]) -> String {
        let objects = payloads.map { payload in
            var members = [
                "\"format\":" + JSONText.quoted(payload.format.rawValue),
                "\"encrypted\":\(payload.isEncrypted)",
            ]
            if let product = payload.productID { members.append("\"product_id\":\(product)") }
            switch payload.outcome {
            case .readings(let readings): members.append("\"readings\":" + JSONText.readings(readings))
            case .keyNeeded: members.append("\"key_needed\":true")
            case .failed(let error): members.append("\"error\":" + JSONText.quoted(error.description))
            }
            return "{" + members.joined(separator: ",") + "}"
        }
        return "[" + objects.joined(separator: ",") + "]"
    }
}
