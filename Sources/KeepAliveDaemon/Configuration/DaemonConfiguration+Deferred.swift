public import Polling

#if canImport(Glibc)
import Glibc
#endif

// `history:` and `clock_sync:` on a device: work the daemon does now and then as deferred tasks (README "Sensor
// history and clocks"), where the device's profile says how.

extension DaemonConfiguration {
    /// How a profile's sensor keeps its history on the device (a profile's `history:`).
    public enum HistoryFormat: String, Sendable, Hashable, CaseIterable {
        /// Xiaomi Mi Flora: hourly entries behind 0x1a10/0x1a11, the device's seconds since power-on at 0x1a12
        /// (`Readings.MiFloraHistory`).
        case miFlora = "mi-flora"
    }

    /// Where and how a profile's sensor takes the time (a profile's `clock:`).
    public struct ClockCharacteristic: Sendable, Hashable {
        public enum Format: String, Sendable, Hashable, CaseIterable {
            /// Unix time, uint32 little endian, then the time zone's offset in whole hours, int8 (LYWSD02 and
            /// LYWSD03MMC stock firmware).
            case unixTime32TimeZone8 = "unix32le-tz8"
        }

        public var characteristic: BluetoothUUID
        public var format: Format

        public init(characteristic: BluetoothUUID, format: Format) {
            self.characteristic = characteristic
            self.format = format
        }
    }

    /// A device's `history:`: its on-device history downloaded as a processing task, every `every`, when the broker
    /// is connected (with MQTT), on external power unless `onBattery`.
    public struct History: Sendable, Hashable {
        public var every: Duration
        public var onBattery: Bool
        public var format: HistoryFormat

        public init(every: Duration = .seconds(86_400), onBattery: Bool = false, format: HistoryFormat) {
            self.every = every
            self.onBattery = onBattery
            self.format = format
        }
    }

    /// A device's `clock_sync:`: its clock set to the gateway's every `every`, as a refresh task.
    public struct ClockSync: Sendable, Hashable {
        public var every: Duration
        public var clock: ClockCharacteristic

        public init(every: Duration, clock: ClockCharacteristic) {
            self.every = every
            self.clock = clock
        }
    }

    /// The least `every` of a history download or a clock sync: each costs a link.
    public static let minimumDeferredEvery = Duration.seconds(60)

    /// The daemon's state directory when `state_directory:` does not say: the first of systemd's
    /// `StateDirectory=` (`$STATE_DIRECTORY`), else /var/lib/keepalive. The spool's default is `spool` in it.
    public static func defaultStateDirectory() -> String {
        if let value = getenv("STATE_DIRECTORY") {
            let first = String(cString: value).split(separator: ":").first.map(String.init)
            if let first, first.hasPrefix("/") { return first }
        }
        return "/var/lib/keepalive"
    }
}
