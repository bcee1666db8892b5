import KeepAlive
import KeepAliveTesting
import Basics
import Logging
import Testing

/// `KeepAlive.liveness`: what the scheduler owes, read without waiting for it (the daemon's watchdog).
@Suite("KeepAlive liveness")
struct LivenessTests {
    let clock = TestClock()

    func makeKeepAlive() throws -> KeepAlive {
        try KeepAlive(
            configuration: .init(interval: .seconds(30)),
            clock: clock,
            powerSource: FixedPowerSource(),
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
    }

    @Test func beforeRunNothingIsOwedAndNothingIsLate() throws {
        let keepAlive = try makeKeepAlive()
        try keepAlive.register(name: "sensor") { _ in .noData }
        let liveness = keepAlive.liveness
        #expect(!liveness.isRunning)
        #expect(liveness.lateness == .zero)
        #expect(liveness.openWindows == 0)
    }

    @Test func anOpenWindowOwesItsTimerAndAnIdleSchedulerItsNextTick() async throws {
        let keepAlive = try makeKeepAlive()
        let events = Collector(keepAlive.events())
        let gate = Gate()
        let entered = Locked(false)
        try keepAlive.register(name: "sensor") { _ in
            entered.withLock { $0 = true }
            await gate.wait()
            return .newData
        }
        try await withRunning(keepAlive) {
            // Released on every path out of here, before `withRunning` stops the scheduler: a failure below must not
            // leave the handler blocked, or the stop waits for it for ever (the manual clock never ends the window).
            // Two TSan runs of the whole suite hung here for more than 10 minutes.
            defer { gate.open() }
            try await waitFor { entered.withLock { $0 } }
            // The window's timer is armed by the ledger's driver, which may come a moment after the handler starts.
            try await waitFor { keepAlive.liveness.openWindows == 1 && keepAlive.liveness.earliestOwed != nil }
            let open = keepAlive.liveness
            #expect(open.isRunning)
            #expect(open.openWindows == 1)
            #expect(open.ticksFired == 1)
            // The window's warning (before its 20-s deadline) comes before the next tick at 30 s.
            let owed = try #require(open.earliestOwed)
            #expect(owed > .at(.zero) && owed < .at(.seconds(20)), "\(owed)")
            #expect(open.lateness == .zero)

            gate.open()
            // A give-up, not a bound: a whole suite under a sanitizer on two cores can starve this task for seconds.
            _ = try await events.next(timeout: .seconds(60)) { if case .report = $0 { true } else { false } }
            let idle = keepAlive.liveness
            #expect(idle.openWindows == 0)
            #expect(idle.earliestOwed == .at(.seconds(30)))
            #expect(idle.lateness == .zero)
        }
    }

    /// Waits (a condition, polled every millisecond; gives up after 60 s) for the window's handler to start.
    func waitFor(_ condition: @Sendable () -> Bool) async throws {
        let clock = ContinuousClock()
        let start = clock.now
        while !condition() {
            guard clock.now - start < .seconds(60) else {
                throw TestClock.WaitTimeout(description: "condition not met in 60 s")
            }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    @Test func latenessIsHowLongAgoTheEarliestOwedThingWasDue() {
        let on = KeepAlive.Liveness(
            now: .at(.seconds(40)), isRunning: true, earliestOwed: .at(.seconds(30)), ticksFired: 1, openWindows: 0)
        #expect(on.lateness == .seconds(10))
        var notRunning = on
        notRunning.isRunning = false
        #expect(notRunning.lateness == .zero)
        var nothingOwed = on
        nothingOwed.earliestOwed = nil
        #expect(nothingOwed.lateness == .zero)
        var future = on
        future.earliestOwed = .at(.seconds(50))
        #expect(future.lateness == .zero)
    }
}
