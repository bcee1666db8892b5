import KeepAlive
import KeepAliveTesting
import Logging
import Synchronization
import Basics
import Testing

@Suite("KeepAlive scheduler")
struct SchedulerTests {
    let clock = TestClock()

    func makeKeepAlive(
        _ configuration: KeepAlive.Configuration = .init(),
        power: any PowerSource = FixedPowerSource(),
        seed: UInt64 = 1
    ) throws -> KeepAlive {
        try KeepAlive(
            configuration: configuration,
            clock: clock,
            powerSource: power,
            randomNumberGenerator: SeededRandomNumberGenerator(seed: seed),
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
    }

    @Test func firstTickFiresAtStart() async throws {
        let keepAlive = try makeKeepAlive()
        let reports = Collector(keepAlive.events())
        try keepAlive.register(name: "sensor") { _ in .newData }
        try await withRunning(keepAlive) {
            let event = try await reports.next { if case .report = $0 { true } else { false } }
            guard case .report(let report) = event else { return }
            #expect(report.tick == 0)
            #expect(report.fired == .at(.zero))
            #expect(report.scheduled == .at(.zero))
            #expect(report.ran)
        }
    }

    @Test func thousandTicksLandExactlyOnTheGrid() async throws {
        let keepAlive = try makeKeepAlive()
        let fired = Locked<[KeepAliveInstant]>([])
        let events = Collector(keepAlive.events())
        try keepAlive.register(name: "sensor", onReport: { report in fired.withLock { $0.append(report.fired) } }) {
            _ in
            .noData
        }
        try await withRunning(keepAlive) {
            _ = try await events.next { if case .report = $0 { true } else { false } }
            for k in 1...1_000 {
                let deadline = clock.instant(.seconds(30) * k)
                try await clock.waitForSleeper(until: deadline)
                clock.advance(to: deadline)
                _ = try await events.next { if case .report(let r) = $0 { r.tick == UInt64(k) } else { false } }
            }
        }
        let instants = fired.withLock { $0 }
        #expect(instants.count == 1_001)
        for (k, instant) in instants.enumerated() {
            #expect(instant == .at(.seconds(30) * k), "tick \(k) fired at \(instant)")
        }
        #expect(keepAlive.statistics.missedTicks == 0)
    }

    @Test func lowPowerStretchesFromTheNextDeadlineAndNormalRestores() async throws {
        let power = MockPowerSource()
        let keepAlive = try makeKeepAlive(power: power)
        let events = Collector(keepAlive.events())
        try keepAlive.register(name: "sensor") { _ in .noData }
        try await withRunning(keepAlive) {
            try await power.waitForSubscriber()
            try await clock.waitForSleeper(until: clock.instant(.seconds(30)))
            clock.advance(to: clock.instant(.seconds(30)))
            _ = try await events.next { if case .report(let r) = $0 { r.tick == 1 } else { false } }

            clock.advance(to: clock.instant(.seconds(45)))
            power.set(.lowPower)
            _ = try await events.next { if case .powerChanged(_, .lowPower, _) = $0 { true } else { false } }
            // Recomputed from the last tick (30 s) with the doubled interval: 90 s, not 60 s.
            try await clock.waitForSleeper(until: clock.instant(.seconds(90)))
            #expect(keepAlive.nextDeadline == .at(.seconds(90)))
            clock.advance(to: clock.instant(.seconds(90)))
            let stretched = try await events.next { if case .report(let r) = $0 { r.tick == 2 } else { false } }
            if case .report(let report) = stretched {
                #expect(report.fired == .at(.seconds(90)))
                #expect(report.interval == .seconds(60))
                #expect(report.power == .lowPower)
            }
            try await clock.waitForSleeper(until: clock.instant(.seconds(150)))

            // Back to normal at 130 s: 90 + 30 = 120 is already past, so the tick fires now.
            clock.advance(to: clock.instant(.seconds(130)))
            power.set(.normal)
            let restored = try await events.next { if case .report(let r) = $0 { r.tick == 3 } else { false } }
            if case .report(let report) = restored {
                #expect(report.fired == .at(.seconds(130)))
                #expect(report.interval == .seconds(30))
                #expect(report.power == .normal)
            }
            try await clock.waitForSleeper(until: clock.instant(.seconds(160)))
        }
        #expect(keepAlive.statistics.missedTicks == 0)
    }

    @Test func criticalPausesAndResumes() async throws {
        let power = MockPowerSource()
        let keepAlive = try makeKeepAlive(power: power)
        let events = Collector(keepAlive.events())
        let reports = Locked<[TickReport]>([])
        try keepAlive.register(name: "sensor", onReport: { r in reports.withLock { $0.append(r) } }) { _ in .noData }
        try await withRunning(keepAlive) {
            try await power.waitForSubscriber()
            _ = try await events.next { if case .report = $0 { true } else { false } }
            clock.advance(to: clock.instant(.seconds(10)))
            power.set(.critical)
            _ = try await events.next { if case .powerChanged(_, .critical, _) = $0 { true } else { false } }
            #expect(keepAlive.nextDeadline == nil)
            #expect(keepAlive.effectiveInterval == nil)
            // An hour passes with no tick at all.
            clock.advance(to: clock.instant(.seconds(3_600)))
            #expect(clock.pendingDeadlines.allSatisfy { $0 > clock.instant(.seconds(3_600)) })
            #expect(reports.withLock { $0.count } == 1)

            power.set(.normal)
            let resumed = try await events.next { if case .report(let r) = $0 { r.tick == 1 } else { false } }
            if case .report(let report) = resumed {
                #expect(report.fired == .at(.seconds(3_600)))
            }
            try await clock.waitForSleeper(until: clock.instant(.seconds(3_630)))
        }
        // The pause is policy, not a miss.
        #expect(keepAlive.statistics.missedTicks == 0)
    }

    @Test func criticalCanStretchInsteadOfPausing() async throws {
        let power = MockPowerSource(.critical)
        let keepAlive = try makeKeepAlive(.init(lowPower: LowPowerPolicy(critical: .stretch(10))), power: power)
        let events = Collector(keepAlive.events())
        try keepAlive.register(name: "sensor") { _ in .noData }
        try await withRunning(keepAlive) {
            _ = try await events.next { if case .report = $0 { true } else { false } }
            try await clock.waitForSleeper(until: clock.instant(.seconds(300)))
            clock.advance(to: clock.instant(.seconds(300)))
            let event = try await events.next { if case .report(let r) = $0 { r.tick == 1 } else { false } }
            if case .report(let report) = event {
                #expect(report.interval == .seconds(300))
                #expect(report.power == .critical)
            }
        }
    }

    @Test func jitterStaysInBoundsAndNeverAccumulates() async throws {
        let jitter = Duration.seconds(5)
        let keepAlive = try makeKeepAlive(.init(jitter: jitter), seed: 42)
        let events = Collector(keepAlive.events())
        let reports = Locked<[TickReport]>([])
        try keepAlive.register(name: "sensor", onReport: { r in reports.withLock { $0.append(r) } }) { _ in .noData }
        try await withRunning(keepAlive) {
            _ = try await events.next { if case .report = $0 { true } else { false } }
            for k in 1...200 {
                let next = try #require(keepAlive.nextDeadline)
                try await clock.waitForSleeper(until: TestClock.Instant(next))
                clock.advance(to: TestClock.Instant(next))
                _ = try await events.next { if case .report(let r) = $0 { r.tick == UInt64(k) } else { false } }
            }
        }
        let all = reports.withLock { $0 }
        #expect(all.count == 201)
        var distinct = Set<Duration>()
        for (k, report) in all.enumerated() {
            #expect(report.scheduled == .at(.seconds(30) * k), "the grid itself never moves")
            let delay = report.scheduled.duration(to: report.fired)
            #expect(delay >= .zero && delay <= jitter, "tick \(k) delayed \(delay)")
            distinct.insert(delay)
        }
        #expect(distinct.count > 150, "jitter should vary from tick to tick")
    }

    @Test func overlappingTickIsSkippedAndCountedNeverStacked() async throws {
        let keepAlive = try makeKeepAlive(.init(interval: .seconds(30), windowBudget: .seconds(20)))
        let events = Collector(keepAlive.events())
        let gate = Gate()
        let calls = Atomic(0)
        try keepAlive.register(name: "stuck") { _ in
            if calls.wrappingAdd(1, ordering: .relaxed).oldValue == 0 {
                await gate.wait()  // ignores the window's cancellation
            }
            return .noData
        }
        defer { gate.open() }
        try await withRunning(keepAlive) {
            _ = try await events.next { if case .fired = $0 { true } else { false } }
            clock.advance(to: clock.instant(.seconds(20)))  // the warning (13.3 s) and the expiry are due
            try await clock.waitForSleeper(until: clock.instant(.seconds(22)))  // the forced end
            clock.advance(to: clock.instant(.seconds(22)))
            let forced = try await events.next { if case .report(let r) = $0 { r.tick == 0 } else { false } }
            if case .report(let report) = forced {
                #expect(report.windowRecord?.outcome == .forcedEnd)
                #expect(report.result.isFailure)
            }
            try await clock.waitForSleeper(until: clock.instant(.seconds(30)))
            clock.advance(to: clock.instant(.seconds(30)))
            let skipped = try await events.next { if case .report(let r) = $0 { r.tick == 1 } else { false } }
            if case .report(let report) = skipped {
                #expect(report.skipReason == .overlap)
            }
            #expect(keepAlive.statistics.skippedOverlap == 1)
            #expect(calls.load(ordering: .relaxed) == 1, "the stuck callback was never stacked")

            gate.open()
            // The forced failure set a 1× backoff (until 30 s); tick 2 at 60 s runs normally.
            try await clock.waitForSleeper(until: clock.instant(.seconds(60)))
            clock.advance(to: clock.instant(.seconds(60)))
            let resumed = try await events.next { if case .report(let r) = $0 { r.tick == 2 } else { false } }
            if case .report(let report) = resumed {
                #expect(report.ran)
            }
        }
        #expect(keepAlive.ledger.openCount == 0)
    }

    @Test func tenMinuteClockJumpGivesExactlyOneCatchUpTick() async throws {
        let keepAlive = try makeKeepAlive()
        let events = Collector(keepAlive.events())
        let reports = Locked<[TickReport]>([])
        try keepAlive.register(name: "sensor", onReport: { r in reports.withLock { $0.append(r) } }) { _ in .noData }
        try await withRunning(keepAlive) {
            _ = try await events.next { if case .report = $0 { true } else { false } }
            try await clock.waitForSleeper(until: clock.instant(.seconds(30)))
            clock.advance(by: .seconds(600))  // a suspend: 19 more grid points pass unseen
            let missed = try await events.next { if case .missed = $0 { true } else { false } }
            if case .missed(_, let count, _) = missed {
                #expect(count == 19)
            }
            let catchUp = try await events.next { if case .report(let r) = $0 { r.tick == 1 } else { false } }
            if case .report(let report) = catchUp {
                #expect(report.fired == .at(.seconds(600)))
                #expect(report.scheduled == .at(.seconds(30)))
            }
            try await clock.waitForSleeper(until: clock.instant(.seconds(630)))
            #expect(reports.withLock { $0.count } == 2, "one catch-up tick, never a burst")
            clock.advance(to: clock.instant(.seconds(630)))
            _ = try await events.next { if case .report(let r) = $0 { r.tick == 2 } else { false } }
        }
        #expect(keepAlive.statistics.missedTicks == 19)
        #expect(reports.withLock { $0.map(\.fired) } == [.at(.zero), .at(.seconds(600)), .at(.seconds(630))])
    }

    @Test func failureBackoffDoublesCapsAndResets() async throws {
        let keepAlive = try makeKeepAlive(.init(maxFailureBackoffMultiplier: 4))
        let events = Collector(keepAlive.events())
        let failing = Atomic(true)
        let ran = Locked<[KeepAliveInstant]>([])
        struct Broken: Error {}
        try keepAlive.register(name: "flaky") { window in
            ran.withLock { $0.append(window.began) }
            return failing.load(ordering: .relaxed) ? .failed(Broken()) : .newData
        }
        try await withRunning(keepAlive) {
            _ = try await events.next { if case .report = $0 { true } else { false } }
            for k in 1...16 {
                let deadline = clock.instant(.seconds(30) * k)
                if k == 15 { failing.store(false, ordering: .relaxed) }
                try await clock.waitForSleeper(until: deadline)
                clock.advance(to: deadline)
                _ = try await events.next { if case .report(let r) = $0 { r.tick == UInt64(k) } else { false } }
            }
        }
        // Runs at 0, 30 (1×), 90 (2×), 210 (4×), 330 (capped at 4×), 450 (capped; succeeds), 480 (reset).
        let seconds = ran.withLock { $0.map { $0.offset.components.seconds } }
        #expect(seconds == [0, 30, 90, 210, 330, 450, 480])
        #expect(keepAlive.statistics.skippedBackoff == 10)
    }

    @Test func severalRegistrationsRunConcurrentlyEachInItsOwnWindow() async throws {
        let keepAlive = try makeKeepAlive()
        let events = Collector(keepAlive.events())
        let gate = Gate()
        let inside = Atomic(0)
        for name in ["a", "b", "c"] {
            try keepAlive.register(name: name) { _ in
                if inside.wrappingAdd(1, ordering: .relaxed).newValue == 3 { gate.open() }
                await gate.wait()  // only opens once all three are inside at the same time
                return .newData
            }
        }
        try await withRunning(keepAlive) {
            var windows = Set<BackgroundTaskID>()
            for _ in 0..<3 {
                let event = try await events.next { if case .report = $0 { true } else { false } }
                if case .report(let report) = event, let window = report.windowRecord { windows.insert(window.id) }
            }
            #expect(windows.count == 3)
        }
    }

    @Test func unregisterStopsFutureTicks() async throws {
        let keepAlive = try makeKeepAlive()
        let events = Collector(keepAlive.events())
        let count = Atomic(0)
        let token = try keepAlive.register(name: "once") { _ in
            count.add(1, ordering: .relaxed)
            return .noData
        }
        try keepAlive.register(name: "other") { _ in .noData }
        try await withRunning(keepAlive) {
            _ = try await events.next { if case .report(let r) = $0 { r.name == "once" } else { false } }
            keepAlive.unregister(token)
            try await clock.waitForSleeper(until: clock.instant(.seconds(30)))
            clock.advance(to: clock.instant(.seconds(30)))
            _ = try await events.next {
                if case .report(let r) = $0 { r.name == "other" && r.tick == 1 } else { false }
            }
        }
        #expect(count.load(ordering: .relaxed) == 1)
    }

    @Test func registrationWhileRunningFiresAtOnceThenOnItsGrid() async throws {
        let keepAlive = try makeKeepAlive()
        let events = Collector(keepAlive.events())
        try keepAlive.register(name: "first") { _ in .noData }
        try await withRunning(keepAlive) {
            _ = try await events.next { if case .report = $0 { true } else { false } }
            clock.advance(to: clock.instant(.seconds(7)))
            try keepAlive.register(name: "late", options: .init(interval: .seconds(10))) { _ in .noData }
            let first = try await events.next { if case .report(let r) = $0 { r.name == "late" } else { false } }
            if case .report(let report) = first { #expect(report.fired == .at(.seconds(7))) }
            try await clock.waitForSleeper(until: clock.instant(.seconds(17)))
        }
    }

    @Test func seedParityCallbackAndStop() async throws {
        let keepAlive = try makeKeepAlive()
        let events = Collector(keepAlive.events())
        let calls = Atomic(0)
        keepAlive.onKeepAliveCallback = { calls.add(1, ordering: .relaxed) }
        #expect(keepAlive.onKeepAliveCallback != nil)
        keepAlive.start()
        let event = try await events.next { if case .report = $0 { true } else { false } }
        if case .report(let report) = event {
            #expect(report.name == "onKeepAliveCallback")
            if case .newData = report.result {} else { Issue.record("expected newData") }
        }
        await keepAlive.stop()
        #expect(!keepAlive.isRunning)
        #expect(calls.load(ordering: .relaxed) == 1)
        keepAlive.onKeepAliveCallback = nil
        #expect(keepAlive.onKeepAliveCallback == nil)
    }

    @Test func stopExpiresOpenWindowsAndWaitsAtMostTheGrace() async throws {
        let keepAlive = try makeKeepAlive(.init(ledger: .init(gracePeriod: .seconds(2))))
        let events = Collector(keepAlive.events())
        let ledgerEvents = Collector(keepAlive.ledger.events())
        let gate = Gate()
        try keepAlive.register(name: "cooperative") { _ in
            try? await Task.sleep(for: .seconds(3_600))  // ends as soon as it is cancelled
            return .noData
        }
        try keepAlive.register(name: "stubborn") { _ in
            await gate.wait()
            return .noData
        }
        defer { gate.open() }
        let run = Task { try await keepAlive.run() }
        for _ in 0..<2 { _ = try await ledgerEvents.next { if case .began = $0 { true } else { false } } }
        let stopped = Task { await keepAlive.stop() }
        let cooperative = try await events.next {
            if case .report(let r) = $0 { r.name == "cooperative" } else { false }
        }
        if case .report(let report) = cooperative { #expect(report.windowRecord?.outcome == .cancelled) }
        #expect(!keepAlive.ledger.isOpen)
        // The stubborn one is force-ended exactly a grace after stop.
        try await clock.waitForSleeper(until: clock.instant(.seconds(2)))
        clock.advance(to: clock.instant(.seconds(2)))
        await stopped.value
        try await run.value
        let stubborn = try await events.next { if case .report(let r) = $0 { r.name == "stubborn" } else { false } }
        if case .report(let report) = stubborn { #expect(report.windowRecord?.outcome == .forcedEnd) }
        #expect(keepAlive.ledger.openCount == 0)
        gate.open()
    }

    @Test func runningTwiceIsRefused() async throws {
        let keepAlive = try makeKeepAlive()
        let events = Collector(keepAlive.events())
        try await withRunning(keepAlive) {
            _ = try await events.next { if case .started = $0 { true } else { false } }
            await #expect(throws: KeepAliveError.self) { try await keepAlive.run() }
        }
    }

    @Test func aRegistrationWithMaxTicksFiresExactlyThatManyThenGoesQuiet() async throws {
        let keepAlive = try makeKeepAlive()
        let events = Collector(keepAlive.events())
        let limitedTicks = Locked<[UInt64]>([])
        let unlimitedTicks = Locked<[UInt64]>([])
        try keepAlive.register(
            name: "limited",
            options: .init(maxTicks: 3),
            onReport: { report in limitedTicks.withLock { $0.append(report.tick) } }
        ) { _ in .noData }
        try keepAlive.register(
            name: "unlimited", onReport: { report in unlimitedTicks.withLock { $0.append(report.tick) } }
        ) { _ in
            .noData
        }
        try await withRunning(keepAlive) {
            for k in 1...5 {
                let deadline = clock.instant(.seconds(30) * k)
                try await clock.waitForSleeper(until: deadline)
                clock.advance(to: deadline)
                _ = try await events.next {
                    if case .report(let r) = $0 { r.name == "unlimited" && r.tick == UInt64(k) } else { false }
                }
            }
        }
        #expect(limitedTicks.withLock { $0 } == [0, 1, 2])
        #expect(unlimitedTicks.withLock { $0 } == [0, 1, 2, 3, 4, 5])
    }

    @Test func aSchedulerWhoseRegistrationsAreAllFinishedSetsNoTimer() async throws {
        let keepAlive = try makeKeepAlive()
        let events = Collector(keepAlive.events())
        try keepAlive.register(name: "once", options: .init(maxTicks: 1)) { _ in .noData }
        try await withRunning(keepAlive) {
            _ = try await events.next { if case .report(let r) = $0 { r.tick == 0 } else { false } }
            // Nothing left to fire, so no deadline to wake for.
            #expect(keepAlive.nextDeadline == nil)
        }
    }

    @Test func runReturnsOnlyAfterEveryOpenWindowHasBeenReported() async throws {
        let keepAlive = try makeKeepAlive()
        let ledgerEvents = Collector(keepAlive.ledger.events())
        let reported = Locked<[String]>([])
        for name in ["a", "b", "c"] {
            try keepAlive.register(name: name, onReport: { report in reported.withLock { $0.append(report.name) } }) {
                window in
                // Runs until the stop cancels it.
                while !Task.isCancelled { await Task.yield() }
                return .noData
            }
        }
        let run = Task { try await keepAlive.run() }
        for _ in 0..<3 { _ = try await ledgerEvents.next { if case .began = $0 { true } else { false } } }
        await keepAlive.stop()
        try await run.value
        // No waiting here: the three reports were delivered before run() returned.
        #expect(reported.withLock { $0.sorted() } == ["a", "b", "c"])
    }

    @Test func sleepClosesTheLedgerEndsOpenWindowsAndResumeFiresOnceOnANewGrid() async throws {
        let keepAlive = try makeKeepAlive()
        let events = Collector(keepAlive.events())
        let ledgerEvents = Collector(keepAlive.ledger.events())
        try keepAlive.register(name: "sensor") { _ in
            // Runs until the window ends.
            while !Task.isCancelled { await Task.yield() }
            return .noData
        }
        try await withRunning(keepAlive) {
            _ = try await ledgerEvents.next { if case .began = $0 { true } else { false } }
            await keepAlive.prepareForSleep()
            // The open window ended early and was reported before prepareForSleep returned.
            let first = try await events.next { if case .report = $0 { true } else { false } }
            if case .report(let report) = first { #expect(report.windowRecord?.outcome == .cancelled) }
            #expect(keepAlive.ledger.openCount == 0)
            #expect(keepAlive.ledger.begin(name: "during sleep", budget: .seconds(1)) == .invalid)

            // Asleep through 95 s: the 30-s, 60-s and 90-s grid points. The 30-s tick is refused (ledger closed).
            try await clock.waitForSleeper(until: clock.instant(.seconds(30)))
            clock.advance(to: clock.instant(.seconds(30)))
            let refused = try await events.next { if case .report(let r) = $0 { r.tick == 1 } else { false } }
            if case .report(let report) = refused {
                guard case .skipped(.refused) = report.outcome else {
                    Issue.record("tick during sleep: \(report.outcome)")
                    return
                }
            }
            clock.advance(to: clock.instant(.seconds(95)))

            keepAlive.resumeAfterSleep()
            let resumed = try await events.next { if case .fired(_, let tick, _, _) = $0 { tick == 2 } else { false } }
            if case .fired(_, _, let scheduled, let at) = resumed {
                #expect(at == .at(.seconds(95)))
                #expect(scheduled == .at(.seconds(95)))
            }
            // The next tick is a full interval after the resume, not on the old grid.
            #expect(keepAlive.nextDeadline == .at(.seconds(125)))
        }
        #expect(keepAlive.statistics.missedTicks == 1)
    }
}
