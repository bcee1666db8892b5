import Fleet
import Testing

@Suite struct LeaseRuleTests {
    static func id(_ gateway: String, _ sequence: UInt64) -> FleetMessageID {
        FleetMessageID(gateway: gateway, incarnation: 1, sequence: sequence)
    }

    static func message(_ kind: LeaseMessage.Kind, _ id: FleetMessageID, after previous: FleetMessageID?)
        -> LeaseMessage
    {
        LeaseMessage(kind: kind, id: id, previous: previous, leaseNanoseconds: 30_000_000_000)
    }

    @Test func theFirstLiveMessageOfAnEmptyTopicIsAccepted() {
        var view = LeaseView(connectedAt: FleetInstant(nanoseconds: 0), leaseNanoseconds: 30_000_000_000)
        let claim = Self.message(.claim, Self.id("a", 1), after: nil)
        #expect(view.apply(claim, retained: false, receivedAt: FleetInstant(nanoseconds: 5)) == .accepted)
        #expect(view.state == .held(gateway: "a", incarnation: 1))
        #expect(view.basis == FleetInstant(nanoseconds: 5))
    }

    @Test func aRetainedMessageAfterConnectingSaysNothingAboutTheHolder() {
        var view = LeaseView(connectedAt: FleetInstant(nanoseconds: 0), leaseNanoseconds: 30_000_000_000)
        // A release that may have lost a race: trusting it would let this gateway claim at once.
        let release = Self.message(.release, Self.id("a", 9), after: nil)
        #expect(view.apply(release, retained: true, receivedAt: FleetInstant(nanoseconds: 1)) == .rejected)
        #expect(view.state == .unknown)
        #expect(view.last == Self.id("a", 9))
    }

    @Test func ofTwoClaimsOnTheSameLastMessageOnlyTheFirstInBrokerOrderWins() {
        var view = LeaseView(connectedAt: FleetInstant(nanoseconds: 0), leaseNanoseconds: 30_000_000_000)
        let renew = Self.message(.claim, Self.id("a", 1), after: nil)
        _ = view.apply(renew, retained: false, receivedAt: FleetInstant(nanoseconds: 1))
        let first = Self.message(.claim, Self.id("b", 1), after: Self.id("a", 1))
        let second = Self.message(.claim, Self.id("c", 1), after: Self.id("a", 1))
        #expect(view.apply(first, retained: false, receivedAt: FleetInstant(nanoseconds: 2)) == .accepted)
        #expect(view.apply(second, retained: false, receivedAt: FleetInstant(nanoseconds: 3)) == .rejected)
        #expect(view.state == .held(gateway: "b", incarnation: 1))
        // The rejected claim is still "last": the holder's next renewal must name it.
        let staleRenewal = Self.message(.renew, Self.id("b", 2), after: Self.id("b", 1))
        #expect(view.apply(staleRenewal, retained: false, receivedAt: FleetInstant(nanoseconds: 4)) == .rejected)
        #expect(view.basis == FleetInstant(nanoseconds: 4))
    }

    @Test func theSameMessageTwiceIsADuplicate() {
        var view = LeaseView(connectedAt: FleetInstant(nanoseconds: 0), leaseNanoseconds: 30_000_000_000)
        let claim = Self.message(.claim, Self.id("a", 1), after: nil)
        _ = view.apply(claim, retained: false, receivedAt: FleetInstant(nanoseconds: 1))
        #expect(view.apply(claim, retained: true, receivedAt: FleetInstant(nanoseconds: 9)) == .duplicate)
        #expect(view.basis == FleetInstant(nanoseconds: 1))
    }

    @Test func theFenceLeavesRoomForDriftAndMargin() {
        let configuration = FleetConfiguration(gateway: "a", incarnation: 1, adapters: [.init(name: "hci0", slots: 5)])
        // 30 s × (1 − 2 × 1000 ppm) − 2 s
        #expect(configuration.fenceAfterSendNanoseconds == 27_940_000_000)
        #expect(configuration.problems.isEmpty)
    }

    @Test func hysteresisNeedsTheMarginForTheWholeDwell() {
        var tracker = ChallengeTracker()
        let start = FleetInstant(nanoseconds: 0)
        #expect(
            tracker.evaluate(incumbent: -70, best: ("b", -65), marginDecibels: 10, dwellNanoseconds: 100, now: start)
                == .stay)
        #expect(
            tracker.evaluate(incumbent: -70, best: ("b", -60), marginDecibels: 10, dwellNanoseconds: 100, now: start)
                == .wait(until: start + 100))
        // A dip below the margin restarts the dwell.
        _ = tracker.evaluate(
            incumbent: -70, best: ("b", -61), marginDecibels: 10, dwellNanoseconds: 100, now: start + 50)
        #expect(
            tracker.evaluate(
                incumbent: -70, best: ("b", -60), marginDecibels: 10, dwellNanoseconds: 100, now: start + 60)
                == .wait(until: start + 160))
        #expect(
            tracker.evaluate(
                incumbent: -70, best: ("c", -59), marginDecibels: 10, dwellNanoseconds: 100, now: start + 160)
                == .move(to: "c"))
    }
}
