import KeepAlive
import KeepAliveTesting
import Logging
import Synchronization
import Testing

let quietLogger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

@Suite("Background task ledger")
struct LedgerTests {
    let clock = TestClock()

    func makeLedger(grace: Duration = .seconds(2), lead: Duration? = nil, history: Int = 1_024) throws
        -> BackgroundTaskLedger
    {
        try BackgroundTaskLedger(
            configuration: .init(gracePeriod: grace, warningLead: lead, historyCapacity: history),
            clock: clock,
            logger: quietLogger
        )
    }

    @Test func warningThenExpirationThenForcedEndAtTheRightInstants() async throws {
        let ledger = try makeLedger()
        let events = Collector(ledger.events())
        let expirations = Atomic(0)
        let id = ledger.begin(name: "sensor", budget: .seconds(30)) { expirations.add(1, ordering: .relaxed) }
        #expect(ledger.timeRemaining(id) == .seconds(30))

        // Lead: min(10 s, 30 s / 3) = 10 s → warning at 20 s.
        try await clock.waitForSleeper(until: clock.instant(.seconds(20)))
        clock.advance(to: clock.instant(.seconds(20)))
        let warning = try await events.next { if case .warning = $0 { true } else { false } }
        #expect(warning == .warning(id: id, name: "sensor", timeRemaining: .seconds(10), at: .at(.seconds(20))))
        #expect(ledger.openEntries.first?.phase == .warned)
        #expect(expirations.load(ordering: .relaxed) == 0)

        try await clock.waitForSleeper(until: clock.instant(.seconds(30)))
        clock.advance(to: clock.instant(.seconds(30)))
        let expired = try await events.next { if case .expired = $0 { true } else { false } }
        #expect(expired == .expired(id: id, name: "sensor", at: .at(.seconds(30)), early: false))
        #expect(expirations.load(ordering: .relaxed) == 1)
        #expect(ledger.timeRemaining(id) == .zero)

        try await clock.waitForSleeper(until: clock.instant(.seconds(32)))
        clock.advance(to: clock.instant(.seconds(32)))
        let ended = try await events.next { if case .ended = $0 { true } else { false } }
        guard case .ended(let record) = ended else { return }
        #expect(record.outcome == .forcedEnd)
        #expect(record.ended == .at(.seconds(32)))
        #expect(record.used == .seconds(32))
        #expect(ledger.openCount == 0)
        #expect(expirations.load(ordering: .relaxed) == 1, "the expiration handler runs once")
        // Ending it late is harmless.
        #expect(ledger.end(id) == nil)
    }

    @Test func endWithinGraceAfterExpiryIsRecordedAsExpired() async throws {
        let ledger = try makeLedger()
        let id = ledger.begin(name: "slow", budget: .seconds(6))
        clock.advance(to: clock.instant(.seconds(7)))
        ledger.processDueTimers()
        #expect(ledger.openEntries.first?.phase == .expired)
        let record = try #require(ledger.end(id))
        #expect(record.outcome == .expired)
    }

    @Test func invalidAfterCloseAndValidAfterReopen() throws {
        let ledger = try makeLedger()
        ledger.close()
        let refused = ledger.begin(name: "late", budget: .seconds(10))
        #expect(refused == .invalid)
        #expect(ledger.history(named: "late").map(\.outcome) == [.refused])
        ledger.end(.invalid)  // a no-op, never a crash
        ledger.reopen()
        let id = ledger.begin(name: "late", budget: .seconds(10))
        #expect(id != .invalid)
        ledger.end(id)
    }

    @Test func historyRecordsEachOutcomeAndAnswersByName() async throws {
        let ledger = try makeLedger(grace: .seconds(1))
        let done = ledger.begin(name: "a", budget: .seconds(10))
        ledger.end(done)
        ledger.end(done)  // idempotent

        let late = ledger.begin(name: "b", budget: .seconds(5))
        let forced = ledger.begin(name: "c", budget: .seconds(5))
        clock.advance(to: clock.instant(.seconds(5)))
        ledger.processDueTimers()
        ledger.end(late)
        clock.advance(to: clock.instant(.seconds(6)))
        ledger.processDueTimers()
        #expect(ledger.timeRemaining(forced) == nil)

        let cancelled = ledger.begin(name: "d", budget: .seconds(10))
        ledger.close()
        ledger.expireAll()
        ledger.end(cancelled)
        _ = ledger.begin(name: "e", budget: .seconds(10))

        let outcomes = Dictionary(uniqueKeysWithValues: ledger.history().map { ($0.name, $0.outcome) })
        #expect(outcomes == ["a": .completed, "b": .expired, "c": .forcedEnd, "d": .cancelled, "e": .refused])
        #expect(ledger.history(named: "c").count == 1)
        #expect(ledger.history(named: "nobody").isEmpty)
        #expect(ledger.openCount == 0)
    }

    @Test func historyIsBounded() throws {
        let ledger = try makeLedger(history: 8)
        for index in 0..<20 {
            ledger.end(ledger.begin(name: "n\(index)", budget: .seconds(1)))
        }
        #expect(ledger.history().map(\.name) == (12..<20).map { "n\($0)" })
    }

    @Test func backgroundTimeRemainingIsTheLeastOfTheOpenWindows() throws {
        let ledger = try makeLedger()
        #expect(ledger.backgroundTimeRemaining == nil)
        let long = ledger.begin(name: "long", budget: .seconds(30))
        clock.advance(by: .seconds(5))
        let short = ledger.begin(name: "short", budget: .seconds(10))
        #expect(ledger.backgroundTimeRemaining == .seconds(10))
        #expect(ledger.timeRemaining(long) == .seconds(25))
        ledger.end(short)
        #expect(ledger.backgroundTimeRemaining == .seconds(25))
        ledger.end(long)
        #expect(ledger.openEntries.isEmpty)
    }

    @Test func unknownIdIsLoggedNotFatal() throws {
        let ledger = try makeLedger()
        #expect(ledger.end(BackgroundTaskID(rawValue: 999)) == nil)
    }

    @Test func withBackgroundTaskEndsOnEveryPath() async throws {
        let ledger = try makeLedger()
        let value = try await ledger.withBackgroundTask(name: "ok", budget: .seconds(10)) { window in
            #expect(window.timeRemaining == .seconds(10))
            return 42
        }
        #expect(value == 42)

        struct Boom: Error {}
        await #expect(throws: Boom.self) {
            try await ledger.withBackgroundTask(name: "throws", budget: .seconds(10)) { _ in throw Boom() }
        }
        #expect(ledger.openCount == 0)
        #expect(ledger.history().map(\.outcome) == [.completed, .completed])

        ledger.close()
        await #expect(throws: BackgroundTaskError(code: .refused, name: "closed")) {
            try await ledger.withBackgroundTask(name: "closed", budget: .seconds(10)) { _ in 1 }
        }
    }

    @Test func withBackgroundTaskCancelsTheBodyAtTheDeadline() async throws {
        let ledger = try makeLedger()
        let task = Task {
            try await ledger.withBackgroundTask(name: "sleepy", budget: .seconds(5)) { window in
                try await window.sleepForTest(.seconds(60))
                return 1
            }
        }
        try await clock.waitForSleeper(until: clock.instant(.seconds(60)))
        clock.advance(to: clock.instant(.seconds(5)))
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(ledger.history().map(\.outcome) == [.expired])
    }

    @Test func withBackgroundTaskReturnsAtForcedEndWhenTheBodyIgnoresCancellation() async throws {
        let ledger = try makeLedger(grace: .seconds(2))
        let events = Collector(ledger.events())
        let gate = Gate()
        defer { gate.open() }
        let task = Task {
            try await ledger.withBackgroundTask(name: "stuck", budget: .seconds(5)) { _ in
                await gate.wait()
                return 1
            }
        }
        _ = try await events.next { if case .began = $0 { true } else { false } }
        clock.advance(to: clock.instant(.seconds(5)))
        try await clock.waitForSleeper(until: clock.instant(.seconds(7)))
        clock.advance(to: clock.instant(.seconds(7)))
        await #expect(throws: BackgroundTaskError(code: .forcedEnd, name: "stuck")) { try await task.value }
        #expect(ledger.history().map(\.outcome) == [.forcedEnd])
    }

    @Test func cancellingTheCallerCancelsTheBody() async throws {
        let ledger = try makeLedger()
        let task = Task {
            try await ledger.withBackgroundTask(name: "cancel-me", budget: .seconds(30)) { window in
                try await window.sleepForTest(.seconds(60))
                return 1
            }
        }
        try await clock.waitForSleeper(until: clock.instant(.seconds(60)))
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(ledger.openCount == 0)
    }
}

extension PollWindow {
    /// Sleeps on the window's own clock (what a body inside a window would do).
    func sleepForTest(_ duration: Duration) async throws {
        try await time.sleep(for: duration)
    }
}
