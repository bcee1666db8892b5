import Glibc
import Testing

@testable import KeepAliveDaemon

/// The second a clock sync writes: it waits for the wall clock to turn a second and writes that one, so a sensor
/// that keeps whole seconds is set within the write's latency instead of up to a second behind.
@Suite("Clock sync's second")
struct ClockSyncTests {
    @Test func theWriteWaitsForTheNextWholeSecond() {
        #expect(ClockSync.untilTheNextSecond(timespec(tv_sec: 1_000, tv_nsec: 0)) == .seconds(1))
        #expect(ClockSync.untilTheNextSecond(timespec(tv_sec: 1_000, tv_nsec: 999_999_000)) == .microseconds(1))
        #expect(ClockSync.untilTheNextSecond(timespec(tv_sec: 1_000, tv_nsec: 250_000_000)) == .milliseconds(750))
    }

    @Test func aWakingJustBeforeOrAfterTheTurnWritesTheNewSecond() {
        // Woken a few microseconds early (a wall clock slewed by NTP while the timer ran on the monotonic one).
        #expect(ClockSync.nearestSecond(timespec(tv_sec: 1_000, tv_nsec: 999_995_000)) == 1_001)
        // Woken late, as on a loaded machine.
        #expect(ClockSync.nearestSecond(timespec(tv_sec: 1_001, tv_nsec: 30_000_000)) == 1_001)
        #expect(ClockSync.nearestSecond(timespec(tv_sec: 1_001, tv_nsec: 499_999_999)) == 1_001)
        #expect(ClockSync.nearestSecond(timespec(tv_sec: 1_001, tv_nsec: 500_000_000)) == 1_002)
    }

    @Test func theTimeIsWrittenLittleEndianThenTheZone() {
        #expect(ClockSync.encode(seconds: 0x6543_2110, timeZoneHours: -5, format: .unixTime32TimeZone8)
            == [0x10, 0x21, 0x43, 0x65, 0xFB])
    }
}
