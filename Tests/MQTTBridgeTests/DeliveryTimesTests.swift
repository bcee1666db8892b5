import Testing

@testable import MQTTBridge

/// The instants the bridge keeps per spooled record: delivery latency at the acknowledgement, the oldest record's
/// age, records found on disk at start, and the bound.
@Suite("Delivery times")
struct DeliveryTimesTests {
    let start = ContinuousClock.now

    func at(_ seconds: Int) -> ContinuousClock.Instant { start + .seconds(seconds) }

    @Test func anAcknowledgementTimesEveryRecordThroughIt() {
        var times = DeliveryTimes(started: start)
        times.spooled(10, at: at(1))
        times.spooled(11, at: at(2))
        times.spooled(12, at: at(3))
        #expect(times.acknowledged(through: 11, at: at(5)) == [.seconds(4), .seconds(3)])
        #expect(times.age(ofOldest: 12, at: at(6)) == .seconds(3))
        #expect(times.acknowledged(through: 12, at: at(6)) == [.seconds(3)])
        #expect(times.acknowledged(through: 12, at: at(7)).isEmpty, "each record is timed once")
    }

    /// A record found on disk at start has no instant: it has waited at least since the start.
    @Test func aRecordFromBeforeTheStartCountsFromTheStart() {
        var times = DeliveryTimes(started: start)
        times.spooled(20, at: at(10))
        #expect(times.age(ofOldest: 3, at: at(12)) == .seconds(12))
        #expect(times.acknowledged(through: 3, at: at(13)).isEmpty)
        #expect(times.age(ofOldest: 20, at: at(13)) == .seconds(3))
    }

    /// Records a full spool dropped before delivery are skipped by the next age, never timed.
    @Test func droppedRecordsAreSkipped() {
        var times = DeliveryTimes(started: start)
        for id in 1...5 { times.spooled(UInt64(id), at: at(id)) }
        #expect(times.age(ofOldest: 4, at: at(10)) == .seconds(6))
        #expect(times.acknowledged(through: 4, at: at(10)) == [.seconds(6)])
    }

    /// Beyond the bound the oldest instants are forgotten; those records then count from the start.
    @Test func theOldestInstantsAreForgottenBeyondTheBound() {
        var times = DeliveryTimes(started: start)
        for id in 0...UInt64(DeliveryTimes.capacity) { times.spooled(id, at: at(1)) }
        #expect(times.age(ofOldest: 0, at: at(2)) == .seconds(2), "the first record's instant was forgotten")
        #expect(times.age(ofOldest: 1, at: at(2)) == .seconds(1))
        #expect(times.acknowledged(through: UInt64(DeliveryTimes.capacity), at: at(3)).count == DeliveryTimes.capacity)
    }
}
