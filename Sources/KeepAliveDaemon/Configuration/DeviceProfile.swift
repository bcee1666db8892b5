import KeepAlive
public import Polling
import Readings

/// A kind of sensor, described once: what a poll writes, reads and listens to, and how the bytes decode. A
/// device names it with `profile: mi-flora` and gets all of it; its own `write`/`read`/`notify` entries and its
/// `fields:` overrides go on top.
///
/// The shipped profiles are YAML files in `Sources/KeepAliveDaemon/Profiles/`, embedded in the binary (no file
/// to install, nothing to lose); `keepalive profiles` lists them. Each states the source of its byte offsets.
public struct DeviceProfile: Sendable, Hashable {
    public var name: String
    public var manufacturer: String?
    public var model: String?
    public var summary: String?
    public var writes: [PeripheralSpec.Write]
    public var reads: [BluetoothUUID]
    public var notifications: [PeripheralSpec.Subscription]
    public var decoding: [BluetoothUUID: PeripheralSpec.Decoding]
    /// `history:`: how the sensor keeps a history a device may download (`history:` on the device).
    public var history: DaemonConfiguration.HistoryFormat?
    /// `clock:`: where the sensor takes the time (`clock_sync:` on the device).
    public var clock: DaemonConfiguration.ClockCharacteristic?
    /// The file it came from, as errors name it.
    public var file: String

    /// The readings a poll of this profile gives, in order, with their units when known before the first poll
    /// (a 0x2904-decoded value's unit is known only then).
    public var readings: [(name: String, unit: String?)] {
        var seen = Set<BluetoothUUID>()
        return (reads + notifications.map(\.characteristic)).filter { seen.insert($0).inserted }.flatMap { uuid in
            DeviceProfile.expectedReadings(of: uuid, decoding: decoding[uuid])
        }
    }

    /// The readings one characteristic gives: a layout's fields, a SIG entry's readings, or one named reading.
    static func expectedReadings(of uuid: BluetoothUUID, decoding: PeripheralSpec.Decoding?) -> [(
        name: String, unit: String?
    )] {
        if let layout = decoding?.layout { return layout.fields.map { ($0.name, $0.unit) } }
        if let entry = uuid.assignedNumber.flatMap(SIGCharacteristics.entry) {
            // A compound characteristic's units can depend on its flags (°C or °F): known at the first value.
            if case .number(let name, let number) = entry.structure { return [(name, number.unit)] }
            return entry.readingNames.map { ($0, nil) }
        }
        return [(decoding?.name ?? uuid.shortDescription, nil)]
    }

    public static func == (lhs: DeviceProfile, rhs: DeviceProfile) -> Bool {
        lhs.name == rhs.name && lhs.file == rhs.file
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(file)
    }
}

extension DeviceProfile {
    /// The profiles shipped in the binary, by name; a profile that does not parse is a defect the tests catch,
    /// reported here as the error rather than a trap.
    public static func builtIn() -> Result<[DeviceProfile], ConfigurationError> {
        var profiles: [DeviceProfile] = []
        for (file, bytes) in EmbeddedProfiles.files {
            do {
                profiles.append(try ConfigurationLoader.profile(String(decoding: bytes, as: UTF8.self), file: file))
            } catch {
                return .failure(error)
            }
        }
        return .success(profiles.sorted { $0.name < $1.name })
    }

    /// The shipped profile called `name`.
    public static func named(_ name: String) throws(ConfigurationError) -> DeviceProfile? {
        try builtIn().get().first { $0.name == name }
    }
}

/// The YAML files of `Profiles/`, as SwiftPM embeds them (`.embedInCode`); a test checks every file there is
/// listed here.
enum EmbeddedProfiles {
    static let files: [(name: String, bytes: [UInt8])] = [
        ("Profiles/battery.yaml", PackageResources.battery_yaml),
        ("Profiles/environmental-sensing.yaml", PackageResources.environmental_sensing_yaml),
        ("Profiles/health-thermometer.yaml", PackageResources.health_thermometer_yaml),
        ("Profiles/heart-rate.yaml", PackageResources.heart_rate_yaml),
        ("Profiles/lywsd03mmc.yaml", PackageResources.lywsd03mmc_yaml),
        ("Profiles/mi-flora.yaml", PackageResources.mi_flora_yaml),
    ]
}
