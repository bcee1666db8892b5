import KeepAliveDaemon
import Testing

/// Polls on command, on a manual clock: one pending per device, one per floor after the last one ended, and the
/// answers a refused one gets (issue #35).
@Suite("Command poll limiter")
struct CommandPollLimiterTests {
    let floor = Duration.seconds(5)

    @Test func aSecondPollWhileOneIsPendingIsRefusedAndNotQueued() {
        var limiter = CommandPollLimiter()
        #expect(limiter.admit("sensor-1", floor: floor, at: .zero) == .poll)
        // 199 more at once, as in the issue: none waits behind the first.
        for index in 1..<200 {
            #expect(limiter.admit("sensor-1", floor: floor, at: .milliseconds(index)) == .pending)
        }
        // Still pending however long it takes (it may wait for a scheduled poll, then use its whole window).
        #expect(limiter.admit("sensor-1", floor: floor, at: .seconds(30)) == .pending)
        #expect(CommandPollLimiter.Decision.pending.kind == "pollPending")
        #expect(CommandPollLimiter.Decision.pending.reason == "a poll is already pending")
    }

    @Test func theNextPollComesAFloorAfterTheLastOneEnded() {
        var limiter = CommandPollLimiter()
        #expect(limiter.admit("sensor-1", floor: floor, at: .zero) == .poll)
        limiter.finished("sensor-1", polled: true, at: .seconds(3))
        let early = limiter.admit("sensor-1", floor: floor, at: .seconds(5))
        #expect(early == .tooSoon(ago: .seconds(2), floor: floor))
        #expect(early.kind == "pollTooSoon")
        #expect(early.reason == "polled on command 2s ago; at most one per 5s (min_interval)")
        #expect(limiter.admit("sensor-1", floor: floor, at: .milliseconds(7_999)) != .poll)
        #expect(limiter.admit("sensor-1", floor: floor, at: .seconds(8)) == .poll, "exactly the floor after")
    }

    @Test func aThousandCommandsInASecondGiveOnePollPerFloor() {
        var limiter = CommandPollLimiter()
        var polls: [Duration] = []
        var pollEnds: Duration?
        // One command a millisecond for 20 s; each poll takes 300 ms.
        for millisecond in 0..<20_000 {
            let now = Duration.milliseconds(millisecond)
            if let end = pollEnds, now >= end {
                limiter.finished("sensor-1", polled: true, at: end)
                pollEnds = nil
            }
            if limiter.admit("sensor-1", floor: floor, at: now) == .poll {
                polls.append(now)
                pollEnds = now + .milliseconds(300)
            }
        }
        #expect(polls == [.zero, .milliseconds(5_300), .milliseconds(10_600), .milliseconds(15_900)])
    }

    @Test func devicesAreLimitedEachOnItsOwnFloor() {
        var limiter = CommandPollLimiter()
        #expect(limiter.admit("fast", floor: .seconds(1), at: .zero) == .poll)
        #expect(limiter.admit("slow", floor: .seconds(60), at: .zero) == .poll, "another device is not pending")
        limiter.finished("fast", polled: true, at: .zero)
        limiter.finished("slow", polled: true, at: .zero)
        #expect(limiter.admit("fast", floor: .seconds(1), at: .seconds(1)) == .poll)
        #expect(
            limiter.admit("slow", floor: .seconds(60), at: .seconds(1))
                == .tooSoon(ago: .seconds(1), floor: .seconds(60)))
    }

    /// A poll the engine refused (a shared device another gateway holds, the ledger closed) never reached the
    /// sensor: it ends the pending one but starts no floor.
    @Test func aPollTheEngineRefusedDoesNotCount() {
        var limiter = CommandPollLimiter()
        #expect(limiter.admit("shared", floor: floor, at: .zero) == .poll)
        limiter.finished("shared", polled: false, at: .milliseconds(1))
        #expect(limiter.admit("shared", floor: floor, at: .milliseconds(2)) == .poll)
    }
}
