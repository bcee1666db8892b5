import Fleet
import Testing

/// One gateway's state machine driven by hand: its own publications are echoed back as the broker would.
@Suite struct FleetGatewayTests {
    static let second: Int64 = 1_000_000_000

    static func gateway(_ name: String = "gw1") -> FleetGateway {
        let configuration = FleetConfiguration(gateway: name, incarnation: 1, adapters: [.init(name: "hci0", slots: 5)])
        return FleetGateway(configuration: configuration, sharedDevices: ["dev1"], at: FleetInstant(nanoseconds: 0))
    }

    static func leasePublications(_ effects: [FleetEffect]) -> [(topic: String, payload: [UInt8])] {
        effects.compactMap {
            if case .publish(let topic, let payload, _) = $0, topic.hasSuffix("/lease") { return (topic, payload) }
            return nil
        }
    }

    /// Connects, hears the device, and runs the device timer until the gateway claims; returns the claim.
    static func claim(_ gateway: inout FleetGateway) -> (topic: String, payload: [UInt8], at: FleetInstant) {
        let start = FleetInstant(nanoseconds: 0)
        _ = gateway.handle(.observed(device: "dev1", adapter: "hci0", rssi: -60), at: start)
        _ = gateway.handle(.connected, at: start)
        let early = gateway.handle(.timerFired(.device("dev1")), at: start + 29 * second)
        #expect(leasePublications(early).isEmpty, "nobody may claim before a whole lease of silence")
        let at = start + 30 * second
        let effects = gateway.handle(.timerFired(.device("dev1")), at: at)
        let claims = leasePublications(effects)
        #expect(claims.count == 1)
        return (claims[0].topic, claims[0].payload, at)
    }

    @Test func aClaimThatComesBackAcceptedStartsAHoldAndTheFirstPollCarriesTheRecord() {
        var gateway = Self.gateway()
        let claim = Self.claim(&gateway)
        let echo = gateway.handle(
            .received(topic: claim.topic, payload: claim.payload, retained: false), at: claim.at + 1_000)
        #expect(
            echo.contains {
                if case .holdStarted(device: "dev1", adapter: "hci0", _, handover: nil) = $0 { true } else { false }
            })
        let first = gateway.permitPoll("dev1", at: claim.at + 2_000)
        #expect(first?.holder == "gw1")
        #expect(gateway.hold(of: "dev1")?.until == claim.at + 27_940_000_000)
    }

    @Test func aHolderWhoseRenewalsDoNotComeBackStopsAtItsFence() {
        var gateway = Self.gateway()
        let claim = Self.claim(&gateway)
        _ = gateway.handle(.received(topic: claim.topic, payload: claim.payload, retained: false), at: claim.at)
        _ = gateway.handle(.disconnected, at: claim.at + Self.second)
        let fence = claim.at + 27_940_000_000
        #expect(gateway.permitPoll("dev1", at: fence + -6 * Self.second) != nil)
        #expect(
            gateway.permitPoll("dev1", at: fence + -4 * Self.second) == nil,
            "a poll must be able to finish before the fence")
        let effects = gateway.handle(.timerFired(.device("dev1")), at: fence)
        #expect(effects.contains(.holdEnded(device: "dev1", reason: .fenced)))
        #expect(gateway.hold(of: "dev1") == nil)
    }

    @Test func anotherGatewaysAcceptedClaimIsNeverPrecededByOurs() {
        var gateway = Self.gateway()
        let claim = Self.claim(&gateway)
        // Someone else's claim on the empty topic reaches the broker first: ours is then rejected.
        let theirs = LeaseMessage(
            kind: .claim, id: FleetMessageID(gateway: "gw2", incarnation: 4, sequence: 1), previous: nil,
            leaseNanoseconds: 30 * Self.second)
        _ = gateway.handle(.received(topic: claim.topic, payload: theirs.encoded(), retained: false), at: claim.at + 1)
        let echo = gateway.handle(
            .received(topic: claim.topic, payload: claim.payload, retained: false), at: claim.at + 2)
        #expect(!echo.contains { if case .holdStarted = $0 { true } else { false } })
        #expect(gateway.leaseView(of: "dev1")?.state == .held(gateway: "gw2", incarnation: 4))
    }

    @Test func malformedPayloadsAreDiagnosticsNotCrashes() {
        var gateway = Self.gateway()
        _ = gateway.handle(.connected, at: FleetInstant(nanoseconds: 0))
        let effects = gateway.handle(
            .received(topic: "keepalive/fleet/device/dev1/lease", payload: Array("{nope".utf8), retained: false),
            at: FleetInstant(nanoseconds: 1))
        #expect(effects.contains { if case .diagnostic(.malformed) = $0 { true } else { false } })
    }
}
