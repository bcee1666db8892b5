import Basics
import KeepAlive
import Logging
import Polling

#if canImport(Glibc)
    import Glibc
#endif

/// Sets a sensor's clock to the gateway's (`clock_sync:` on a device whose profile has a `clock:`), on one short
/// link. The characteristic takes whole seconds, so the write waits for the gateway's clock to turn a second (at
/// most one, with the link already made) and writes that second: the sensor is then off by the write's own
/// latency, not by up to a second of truncation as well.
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
            try await TimerFDClock().sleep(for: Self.untilTheNextSecond(Self.realtime()))
            let (seconds, zone) = Self.now()
            try await transport.write(
                Self.encode(seconds: seconds, timeZoneHours: zone, format: sync.clock.format), to: characteristic,
                of: peripheral, type: .request)
            return (seconds, zone)
        }
    }

    /// The gateway's time now to the nearest second (right after a turn of the second, the waking a few
    /// microseconds early or late does not move it by one), and its time zone's offset from UTC in whole hours
    /// (what the sensor shows).
    static func now() -> (UInt32, Int8) {
        var seconds = nearestSecond(realtime())
        var parts = tm()
        localtime_r(&seconds, &parts)
        return (UInt32(clamping: Int(seconds)), Int8(clamping: parts.tm_gmtoff / 3_600))
    }

    /// How long from `now` until the wall clock's next whole second.
    static func untilTheNextSecond(_ now: timespec) -> Duration {
        .nanoseconds(1_000_000_000 - Int64(now.tv_nsec))
    }

    /// `now` rounded to the nearest whole second.
    static func nearestSecond(_ now: timespec) -> time_t {
        now.tv_sec + (now.tv_nsec >= 500_000_000 ? 1 : 0)
    }

    static func realtime() -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return now
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
