import Testing

@testable import MQTTBridge

/// Answers to rejected commands, on a manual sequence of instants: five at once per device, then one each 12 s;
/// the gateway as a whole twenty at once, then one each 3 s; the withheld ones counted into the next answer.
@Suite("Answer limiter")
struct AnswerLimiterTests {
    @Test func aDeviceGetsFiveAnswersAtOnceThenOneEvery12SecondsWithTheWithheldCounted() {
        var limiter = AnswerLimiter()
        for _ in 0..<5 { #expect(limiter.admit("sensor-1", at: .zero) == .send(withheld: 0)) }
        for _ in 0..<3_995 { #expect(limiter.admit("sensor-1", at: .seconds(1)) == .withhold) }
        #expect(limiter.admit("sensor-1", at: .seconds(11)) == .withhold)
        #expect(limiter.admit("sensor-1", at: .seconds(12)) == .send(withheld: 3_996))
        #expect(limiter.admit("sensor-1", at: .seconds(13)) == .withhold)
        // Quiet for a minute: a full bucket again, never more.
        for index in 0..<5 {
            #expect(limiter.admit("sensor-1", at: .seconds(600)) == .send(withheld: index == 0 ? 1 : 0))
        }
        #expect(limiter.admit("sensor-1", at: .seconds(600)) == .withhold)
    }

    @Test func theGatewayAsAWholeIsLimitedAcrossDevices() {
        var limiter = AnswerLimiter()
        var sent = 0
        for device in 0..<10 {
            for _ in 0..<5 where limiter.admit("sensor-\(device)", at: .zero) != .withhold { sent += 1 }
        }
        #expect(sent == 20)
        // One more for the gateway each 3 s, to a device whose own bucket is full.
        #expect(limiter.admit("sensor-9", at: .seconds(3)) == .send(withheld: 5))
        #expect(limiter.admit("sensor-9", at: .seconds(3)) == .withhold)
    }
}
