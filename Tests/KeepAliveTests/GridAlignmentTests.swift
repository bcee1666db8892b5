import KeepAlive
import KeepAliveTesting
import Logging
import Basics
import Testing

/// Placement's hook in the scheduler: `KeepAlive.align(_:)` puts a registration's ticks on `start + phase +
/// k·interval`, never sooner than its interval after the last tick, and the grid stays aligned through interval
/// changes, power changes and a sleep.
@Suite("Grid alignment")
struct GridAlignmentTests {
    let clock = TestClock()

    func makeKeepAlive(power: any PowerSource = FixedPowerSource()) throws -> KeepAlive {
        try KeepAlive(
            configuration: .init(interval: .seconds(30)), clock: clock, powerSource: power,
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
    }

    /// Steps the clock to `seconds` (where the scheduler must sleep until) and waits for tick `tick`'s report.
    func expectTick(
        _ tick: UInt64, at seconds: Int, _ events: Collector<KeepAliveEvent>,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let instant = clock.instant(.seconds(seconds))
        try await clock.waitForSleeper(until: instant)
        clock.advance(to: instant)
        let event = try await events.next { if case .report(let r) = $0 { r.tick == tick } else { false } }
        guard case .report(let report) = event else { return }
        #expect(report.fired == .at(.seconds(seconds)), "tick \(tick)", sourceLocation: sourceLocation)
    }

    @Test func aPhaseSetBeforeStartAppliesFromTheSecondTick() async throws {
        let keepAlive = try makeKeepAlive()
        let events = Collector(keepAlive.events())
        let token = try keepAlive.register(name: "sensor") { _ in .noData }
        keepAlive.align([(token, .seconds(7))])
        try await withRunning(keepAlive) {
            _ = try await events.next { if case .report(let r) = $0 { r.tick == 0 } else { false } }
            // The first tick fires at start; the next at the first aligned point a whole interval later.
            try await expectTick(1, at: 37, events)
            try await expectTick(2, at: 67, events)
            try await expectTick(3, at: 97, events)
        }
    }

    @Test func aPhaseSetWhileRunningNeverPollsSoonerThanTheIntervalAndSurvivesChanges() async throws {
        let power = MockPowerSource()
        let keepAlive = try makeKeepAlive(power: power)
        let events = Collector(keepAlive.events())
        let token = try keepAlive.register(name: "sensor") { _ in .noData }
        try await withRunning(keepAlive) {
            try await power.waitForSubscriber()
            _ = try await events.next { if case .report(let r) = $0 { r.tick == 0 } else { false } }
            try await expectTick(1, at: 30, events)
            clock.advance(to: clock.instant(.seconds(31)))
            // Phase 10 s: the points 10, 40, 70 … The one at 40 s is sooner than 30 s after the last tick: 70 s.
            keepAlive.align([(token, .seconds(10))])
            #expect(keepAlive.nextGridPoint(of: token) == .at(.seconds(70)))
            try await expectTick(2, at: 70, events)
            try await expectTick(3, at: 100, events)
            // Low power doubles the interval: points 10 + k·60, the first at least 60 s after 100 s: 190 s.
            power.set(.lowPower)
            _ = try await events.next { if case .powerChanged(_, .lowPower, _) = $0 { true } else { false } }
            #expect(keepAlive.nextGridPoint(of: token) == .at(.seconds(190)))
            try await expectTick(4, at: 190, events)
            power.set(.normal)
            _ = try await events.next { if case .powerChanged(_, .normal, _) = $0 { true } else { false } }
            try await expectTick(5, at: 220, events)
            // A new interval (45 s): points 10 + k·45, the first at least 45 s after 220 s: 280 s.
            try keepAlive.setInterval(.seconds(45), for: token)
            try await expectTick(6, at: 280, events)
            try await expectTick(7, at: 325, events)
        }
    }

    @Test func afterASleepTheWakeTickFiresAtOnceAndTheGridStaysAligned() async throws {
        let keepAlive = try makeKeepAlive()
        let events = Collector(keepAlive.events())
        let token = try keepAlive.register(name: "sensor") { _ in .noData }
        keepAlive.align([(token, .seconds(5))])
        try await withRunning(keepAlive) {
            _ = try await events.next { if case .report(let r) = $0 { r.tick == 0 } else { false } }
            try await expectTick(1, at: 35, events)
            await keepAlive.prepareForSleep()
            clock.advance(to: clock.instant(.seconds(200)))
            keepAlive.resumeAfterSleep()
            let event = try await events.next { if case .report(let r) = $0 { r.tick == 2 } else { false } }
            guard case .report(let wake) = event else { return }
            #expect(wake.fired == .at(.seconds(200)))
            // Then the first point of 5 + k·30 at least 30 s after the wake: 245 s.
            try await expectTick(3, at: 245, events)
        }
    }
}
