import KeepAlive
import Polling
import KeepAliveTesting
import Basics
import Logging
import Testing

/// A launch that waits for its ``LaunchGate`` (the poll engine's connection slot) has a window but no task: its
/// callback runs only once the gate lets it, and a window that ends first is reported with the gate's result.
@Suite("Launch gate")
struct LaunchGateTests {
    let clock = TestClock()

    /// Holds every request until the test opens it; then runs `handler` as the launch's work.
    final class HeldGate: LaunchGate {
        private let requests = Locked<[(start: @Sendable () -> Void, done: Bool)]>([])
        private let handler: @Sendable (PollWindow) async -> PollResult

        init(handler: @escaping @Sendable (PollWindow) async -> PollResult) {
            self.handler = handler
        }

        func request(_ window: PollWindow, start: @escaping @Sendable (@escaping LaunchWork) -> Void) -> LaunchRequest {
            let handler = self.handler
            let index = requests.withLock { requests in
                requests.append(({ start { window in LaunchResult(await handler(window)) } }, false))
                return requests.count - 1
            }
            return LaunchRequest { [self] in
                guard take(index) != nil else { return nil }
                return LaunchResult(.failed(TransportError(.timeout, "window ended while waiting for the gate")))
            }
        }

        /// Lets request `index` run; false if it was withdrawn or opened before.
        func open(_ index: Int) -> Bool {
            guard let start = take(index) else { return false }
            start()
            return true
        }

        var count: Int { requests.withLock { $0.count } }

        private func take(_ index: Int) -> (@Sendable () -> Void)? {
            requests.withLock { requests in
                guard index < requests.count, !requests[index].done else { return nil }
                requests[index].done = true
                return requests[index].start
            }
        }
    }

    func makeKeepAlive() throws -> KeepAlive {
        try KeepAlive(
            configuration: .init(interval: .seconds(30)),
            clock: clock,
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
    }

    @Test func aLaunchWaitsForItsGateAndRunsInTheSameWindowOnceLetIn() async throws {
        let keepAlive = try makeKeepAlive()
        let calls = Locked(0)
        let gate = HeldGate { window in
            calls.withLock { $0 += 1 }
            return window.timeRemaining > .zero ? .newData : .noData
        }
        let events = Collector(keepAlive.events())
        try keepAlive.register(name: "sensor", options: .init(budget: .seconds(10)), gate: gate)
        try await withRunning(keepAlive) {
            try await waitUntil("the launch asked its gate") { gate.count == 1 }
            #expect(keepAlive.ledger.openCount == 1, "the window is open while the launch waits")
            #expect(calls.withLock { $0 } == 0, "the callback must not run before the gate lets it")
            clock.advance(to: clock.instant(.seconds(4)))
            #expect(gate.open(0))
            let event = try await events.next { if case .report = $0 { true } else { false } }
            guard case .report(let report) = event, case .ran(let result, let window) = report.outcome else {
                Issue.record("no report of a run: \(event)")
                return
            }
            guard case .newData = result else {
                Issue.record("expected newData, got \(result)")
                return
            }
            #expect(window.outcome == .completed)
            #expect(window.used == .seconds(4), "the wait for the gate counts against the budget")
            #expect(calls.withLock { $0 } == 1)
        }
    }

    @Test func aWindowThatEndsWhileWaitingIsReportedWithTheGatesResultAndTheCallbackNeverRuns() async throws {
        let keepAlive = try makeKeepAlive()
        let calls = Locked(0)
        let gate = HeldGate { _ in
            calls.withLock { $0 += 1 }
            return .newData
        }
        let events = Collector(keepAlive.events())
        try keepAlive.register(name: "sensor", options: .init(budget: .seconds(10)), gate: gate)
        try await withRunning(keepAlive) {
            try await waitUntil("the launch asked its gate") { gate.count == 1 }
            // The ledger's driver sleeps until the warning (2/3 of the budget): past it and the deadline at once.
            try await waitUntil("the ledger's driver sleeps") {
                clock.pendingDeadlines.contains { $0 < clock.instant(.seconds(10)) }
            }
            clock.advance(to: clock.instant(.seconds(10)))
            let event = try await events.next { if case .report = $0 { true } else { false } }
            guard case .report(let report) = event, case .ran(let result, let window) = report.outcome else {
                Issue.record("no report of a run: \(event)")
                return
            }
            guard case .failed(let error as TransportError) = result else {
                Issue.record("expected the gate's failure, got \(result)")
                return
            }
            #expect(error.message.contains("waiting for the gate"))
            #expect(window.outcome == .expired, "\(window); events: \(events.all)")
            #expect(keepAlive.ledger.openCount == 0, "events: \(events.all)")
            #expect(!gate.open(0), "a withdrawn request is never let in")
            #expect(calls.withLock { $0 } == 0)

            // The next tick asks again, and runs.
            let next = clock.instant(.seconds(30))
            try await clock.waitForSleeper(until: next)
            clock.advance(to: next)
            try await waitUntil("the second tick asked its gate") { gate.count == 2 }
            #expect(gate.open(1), "withdrawn before it was let in; events: \(events.all)")
            _ = try await events.next { if case .report(let report) = $0 { report.tick == 1 } else { false } }
            #expect(calls.withLock { $0 } == 1, "events: \(events.all)")
        }
    }

    @Test func stopWithdrawsWaitingLaunchesAndReturnsWithoutWaitingForThem() async throws {
        let keepAlive = try makeKeepAlive()
        let gate = HeldGate { _ in .newData }
        let reports = Locked<[TickReport]>([])
        for index in 0..<3 {
            try keepAlive.register(
                name: "sensor-\(index)", options: .init(budget: .seconds(10)), gate: gate,
                onReport: { report in reports.withLock { $0.append(report) } }
            )
        }
        let running = Task { try await keepAlive.run() }
        try await waitUntil("every launch asked its gate") { gate.count == 3 }
        await keepAlive.stop()
        try await running.value
        let all = reports.withLock { $0 }
        #expect(all.count == 3, "every window reported before stop() returned: \(all)")
        #expect(all.allSatisfy { $0.result.isFailure })
        #expect(keepAlive.ledger.openCount == 0)
    }
}
