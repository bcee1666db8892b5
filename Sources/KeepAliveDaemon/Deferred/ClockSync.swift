import Basics
import Logging
import Polling

#if canImport(Glibc)
    import Glibc
#endif

/// Sets a sensor's clock to the gateway's (`clock_sync:` on a device whose profile has a `clock:`), on one short
/// link. The time is taken right before the write, so the sensor is off by the write's own latency at most.
struct ClockSync {
    let device: DaemonConfiguration.Device
    let sync: DaemonConfiguration.ClockSync
    let engine: PollEngine

    /// Writes the time; returns what was written (Unix seconds, the time zone's offset in hours).
    func run() async throws -> (unixSeconds: UInt32, timeZoneHours: Int8) {
        let characteristic = sync.clock.characteristic
        return try await engine.withLink(
            to: device.name, holder: "clock sync", characteristics: [characteristic]
        ) { peripheral, transport in
            let (seconds, zone) = Self.now()
            try await transport.write(
                Self.encode(seconds: seconds, timeZoneHours: zone, format: sync.clock.format), to: characteristic,
                of: peripheral, type: .request)
            return (seconds, zone)
        }
    }

    /// The gateway's time now, and its time zone's offset from UTC in whole hours (what the sensor shows).
    static func now() -> (UInt32, Int8) {
        var seconds = time(nil)
        var parts = tm()
        localtime_r(&seconds, &parts)
        return (UInt32(clamping: Int(seconds)), Int8(clamping: parts.tm_gmtoff / 3_600))
    }

    static func encode(
        seconds: UInt32, timeZoneHours: Int8, format: DaemonConfiguration.ClockCharacteristic.Format
    ) -> [UInt8] {
        switch format {
        case .unixTime32TimeZone8:
            (0..<4).map { UInt8(truncatingIfNeeded: seconds >> ($0 * 8)) } + [UInt8(bitPattern: timeZoneHours)]
        }
    }
}
