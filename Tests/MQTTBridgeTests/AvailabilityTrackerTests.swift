import Testing
@testable import MQTTBridge

@Suite struct AvailabilityTrackerTests {
    @Test func twoFailuresStayOnlineTheThirdGoesOfflineAndOneSuccessComesBack() {
        var tracker = AvailabilityTracker(threshold: 3)
        #expect(tracker.record(succeeded: true) == .online)
        #expect(tracker.record(succeeded: false) == nil)
        #expect(tracker.record(succeeded: false) == nil)
        #expect(tracker.availability == .online)
        #expect(tracker.record(succeeded: false) == .offline)
        #expect(tracker.record(succeeded: false) == nil)
        #expect(tracker.consecutiveFailures == 4)
        #expect(tracker.record(succeeded: true) == .online)
        #expect(tracker.consecutiveFailures == 0)
    }

    @Test func aSuccessBetweenFailuresResetsTheCount() {
        var tracker = AvailabilityTracker(threshold: 3)
        tracker.record(succeeded: true)
        for _ in 0..<2 { tracker.record(succeeded: false) }
        #expect(tracker.record(succeeded: true) == nil)
        for _ in 0..<2 { #expect(tracker.record(succeeded: false) == nil) }
        #expect(tracker.availability == .online)
    }

    @Test func aDeviceThatNeverAnsweredGoesOfflineAtTheThreshold() {
        var tracker = AvailabilityTracker(threshold: 3)
        #expect(tracker.record(succeeded: false) == nil)
        #expect(tracker.availability == nil)
        #expect(tracker.record(succeeded: false) == nil)
        #expect(tracker.record(succeeded: false) == .offline)
    }

    @Test func aThresholdBelowOneMeansTheFirstFailure() {
        var tracker = AvailabilityTracker(threshold: 0)
        tracker.record(succeeded: true)
        #expect(tracker.record(succeeded: false) == .offline)
    }
}
