import Readings
import Testing

@testable import KeepAliveDaemon

/// The clock a history download places entries by: the last download's, while it agrees with the one read on the
/// link (`HistoryDownload.continuing`).
@Suite("History's clock across downloads")
struct HistoryClockTests {
    /// The last entry published: at device second 7,200, placed at 1,800,000,000.25 s on the gateway's clock.
    let position = HistoryPositions.Position(
        next: 3, deviceTimestamp: 7_200, measured: .milliseconds(1_800_000_000_250), lastValid: 2)

    @Test func aClockReadASecondOffGoesOnWithTheLastDownloadsTimes() {
        // Read on this link, the same entry would land 0.75 s earlier (the sensor counts whole seconds).
        let fresh = MiFloraHistory.DeviceClock(deviceNow: 10_800, gatewayWallAtRead: 1_800_003_599.5)
        let clock = HistoryDownload.continuing(fresh, from: position)
        #expect(clock.wallTime(ofDeviceTimestamp: 7_200) == 1_800_000_000.25)
        // The next hour is an hour after the last one published, to the millisecond.
        #expect(clock.wallTime(ofDeviceTimestamp: 10_800) == 1_800_003_600.25)
    }

    @Test func aClockThatHasDriftedMoreThanTwoSecondsIsReadAgain() {
        let fresh = MiFloraHistory.DeviceClock(deviceNow: 10_800, gatewayWallAtRead: 1_800_003_603.0)
        #expect(HistoryDownload.continuing(fresh, from: position) == fresh)
        let behind = MiFloraHistory.DeviceClock(deviceNow: 10_800, gatewayWallAtRead: 1_800_003_597.0)
        #expect(HistoryDownload.continuing(behind, from: position) == behind)
    }

    @Test func theBoundIsTwoSecondsEitherWay() {
        let early = MiFloraHistory.DeviceClock(deviceNow: 10_800, gatewayWallAtRead: 1_800_003_598.25)
        #expect(HistoryDownload.continuing(early, from: position) != early)
        let late = MiFloraHistory.DeviceClock(deviceNow: 10_800, gatewayWallAtRead: 1_800_003_602.25)
        #expect(HistoryDownload.continuing(late, from: position) != late)
    }
}
