@testable import BlueZ
import BlueZSimulator
import DBus
import KeepAlive
import Polling
import KeepAliveTesting
import Testing

/// `BlueZTransport.linkTime(of:)`: bluetoothd's own `Connected` true → false, stamped as the object cache applies
/// each change; first on a bare cache on a manual clock, then against the simulator.
@Suite("BlueZ link time", .serialized)
struct LinkTimeTests {
    typealias H = TransportHarness
    typealias Tree = ObjectCacheTreeTests
    static let device: ObjectPath = "/org/bluez/hci0/dev_C0_FF_EE_00_00_01"
    static let other: ObjectPath = "/org/bluez/hci0/dev_C0_FF_EE_00_00_02"

    @Test func theLinkClockSumsConnectedChangesOfTimedDevicesAsTheyAreApplied() {
        let clock = TestClock()
        let time = TimeBase(clock)
        var state = BlueZObjectCache.State()
        state.ready = true
        func apply(_ change: BlueZObjectCache.TreeChange, at milliseconds: Int64) {
            clock.advance(to: TestClock.Instant(offset: .milliseconds(milliseconds)))
            Tree.apply(change, to: &state, time: time)
        }
        func connected(_ path: ObjectPath, _ value: Bool) -> BlueZObjectCache.TreeChange {
            Tree.changed(path, BlueZ.deviceInterface, ["Connected": .boolean(value)])
        }
        for (path, address) in [(Self.device, "C0:FF:EE:00:00:01"), (Self.other, "C0:FF:EE:00:00:02")] {
            apply(
                Tree.added(path, BlueZ.deviceInterface, ["Address": .string(address), "Connected": .boolean(false)]),
                at: 0)
        }
        state.links[Self.device] = LinkClock(connected: false, at: time.now)
        #expect(state.links[Self.device]?.time == .zero, "no link yet: zero")

        apply(connected(Self.device, true), at: 1_000)
        #expect(state.links[Self.device]?.time == nil, "up: not known yet")
        apply(connected(Self.device, true), at: 1_500)  // a repeated value changes nothing
        apply(Tree.changed(Self.device, BlueZ.deviceInterface, ["ServicesResolved": .boolean(false)]), at: 3_500)
        #expect(state.links[Self.device]?.time == nil, "ServicesResolved=false is not the link's end")
        apply(connected(Self.device, false), at: 3_506)
        #expect(state.links[Self.device]?.time == .milliseconds(2_506))
        apply(connected(Self.device, false), at: 3_600)
        #expect(state.links[Self.device]?.time == .milliseconds(2_506))

        // Another link before the clock is started again adds to it; the object's removal ends a link.
        apply(connected(Self.device, true), at: 4_000)
        apply(Tree.removed(Self.device, [BlueZ.deviceInterface]), at: 4_250)
        #expect(state.links[Self.device]?.time == .milliseconds(2_756))

        // A device that is not timed gets no clock.
        apply(connected(Self.other, true), at: 5_000)
        apply(connected(Self.other, false), at: 6_000)
        #expect(state.links[Self.other] == nil && state.links.count == 1)

        // A clock started while the link is up counts from its start.
        state.links[Self.other] = LinkClock(connected: true, at: time.now)
        apply(connected(Self.other, false), at: 6_040)
        #expect(state.links[Self.other]?.time == .milliseconds(40))
    }

    @Test func aPollsLinkIsKnownWhenDisconnectReturnsAndSpansItsOperationsAndBlueZsDisconnect() async throws {
        try await H.with { h in
            let transport = h.transport
            let options = ConnectOptions(timeout: .seconds(5), characteristics: [H.counter])
            // A first connection resolves the GATT objects: the measured one is a steady-state poll.
            try await transport.connect(H.sensor, options: options)
            await transport.disconnect(H.sensor, timeout: .seconds(5))
            #expect(transport.linkTime(of: H.sensor) ?? .zero > .zero)

            let started = ContinuousClock.now
            try await transport.connect(H.sensor, options: options)
            let connected = ContinuousClock.now
            #expect(transport.linkTime(of: H.sensor) == nil, "the link is up: its time is not known yet")
            _ = try await transport.read(H.counter, from: H.sensor)
            let read = ContinuousClock.now
            await transport.disconnect(H.sensor, timeout: .seconds(5))
            let ended = ContinuousClock.now
            // Known as soon as disconnect returns: the Connected=false that follows the reply was waited for.
            let link = try #require(transport.linkTime(of: H.sensor))
            // Connected=true came before connect returned and Connected=false after the Disconnect's reply, which
            // the simulator sends after its (scaled) 2-s disconnect: 20 ms.
            let disconnect = Duration.seconds(2) * 0.01
            #expect(link >= connected.duration(to: read) + disconnect, "link \(link)")
            #expect(link <= started.duration(to: ended), "link \(link)")
        }
    }

    @Test func aConnectThatBringsNoLinkUpReadsZeroNotTheLastLinksTime() async throws {
        try await H.with { h in
            let transport = h.transport
            try await transport.connect(
                H.sensor, options: ConnectOptions(timeout: .seconds(5), characteristics: [H.counter]))
            await transport.disconnect(H.sensor, timeout: .seconds(5))
            #expect(transport.linkTime(of: H.sensor) ?? .zero > .zero)
            try await h.simulator.inject(.connectAbort(count: 1), device: H.sensor.address)
            await #expect(throws: TransportError.self) {
                try await transport.connect(H.sensor, options: ConnectOptions(timeout: .seconds(5)))
            }
            await transport.disconnect(H.sensor, timeout: .seconds(5))
            #expect(transport.linkTime(of: H.sensor) == .zero)
            #expect(transport.linkTime(of: Peripheral(address: "C0:FF:EE:00:00:02", adapter: "hci0")) == nil)
            #expect(transport.linkTime(of: Peripheral(address: "not an address", adapter: "hci0")) == .zero)
        }
    }

    @Test func aConnectedSignalThatNeverCameIsTimedFromTheGetThatStoodInForIt() async throws {
        try await H.with(H.configuration { $0.quirks = [.noConnectedSignal] }) { h in
            let transport = h.transport
            try await transport.connect(
                H.sensor, options: ConnectOptions(timeout: .seconds(5), characteristics: [H.counter]))
            await transport.disconnect(H.sensor, timeout: .seconds(5))
            #expect(transport.missedConnectedSignals > 0)
            #expect(transport.linkTime(of: H.sensor) ?? .zero >= .seconds(2) * 0.01)
        }
    }

    @Test func everyRecordOfThePollEngineCarriesItsLinkTime() async throws {
        try await H.with { h in
            let (keepAlive, engine) = try h.engine()
            let records = Collector(engine.records())
            try await running(keepAlive) {
                for tick in 0..<2 {
                    if tick > 0 { try await h.advance(toTick: tick) }
                    let record = try await records.next { $0.tick == UInt64(tick) }
                    #expect(record.result == .newData, "\(String(describing: record.failure))")
                    let link = try #require(record.link, "tick \(tick) has no link time")
                    #expect(link >= .seconds(2) * 0.01 && link < .seconds(5), "tick \(tick): \(link)")
                }
            }
        }
    }
}
