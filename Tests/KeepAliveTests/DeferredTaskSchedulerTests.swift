import Basics
import Foundation
import KeepAlive
import KeepAliveTesting
import Synchronization
import Testing

/// Every rule of the deferred tasks (issue #41, 1), on the manual clock.
@Suite("Deferred tasks")
struct DeferredTaskSchedulerTests {
    let clock = TestClock()

    func makeKeepAlive(power: any PowerSource = FixedPowerSource()) throws -> KeepAlive {
        try KeepAlive(
            configuration: .init(interval: .seconds(30)), clock: clock, powerSource: power, logger: quietLogger)
    }

    func makeScheduler(
        _ keepAlive: KeepAlive, network: (any DeferredTaskCondition)? = nil, gate: DeviceGate? = nil,
        store: (any DeferredTaskStore)? = nil, maxAttempts: Int = 3, wallClock: (@Sendable () -> Duration)? = nil
    ) throws -> DeferredTaskScheduler {
        try DeferredTaskScheduler(
            keepAlive: keepAlive,
            configuration: .init(retryDelay: .seconds(60), maxRetryDelay: .seconds(600), maxAttempts: maxAttempts),
            network: network, gate: gate, store: store, wallClock: wallClock, logger: quietLogger)
    }

    /// Runs `scheduler` for the test's body, then stops it.
    func whileRunning<T>(_ scheduler: DeferredTaskScheduler, _ body: () async throws -> T) async throws -> T {
        let task = Task { try await scheduler.run() }
        defer { task.cancel() }
        let result = try await body()
        task.cancel()
        try? await task.value
        return result
    }

    /// A handler that records its runs and finishes when the test says (or at once).
    final class Probe: Sendable {
        let runs = Atomic(0)
        let gate = Gate()
        let holds: Bool

        init(holds: Bool = false) {
            self.holds = holds
        }

        var handler: @Sendable (DeferredTask) async throws -> Void {
            { [self] _ in
                runs.add(1, ordering: .relaxed)
                if holds { await gate.wait() }
            }
        }

        var count: Int { runs.load(ordering: .relaxed) }
    }

    // MARK: When it starts

    @Test func notBeforeItsEarliestBegin() async throws {
        let keepAlive = try makeKeepAlive()
        let scheduler = try makeScheduler(keepAlive)
        let probe = Probe()
        let events = Collector(scheduler.events())
        try scheduler.register("history", kind: .processing, handler: probe.handler)
        try scheduler.submit(
            DeferredTaskRequest(identifier: "history", kind: .processing, earliestBegin: .at(.seconds(3_600))))
        try await whileRunning(scheduler) {
            try await clock.waitForSleeper(until: clock.instant(.seconds(3_600)))
            #expect(scheduler.status(of: "history") == .waiting(until: .at(.seconds(3_600)), failures: 0))
            clock.advance(to: clock.instant(.seconds(3_599)))
            #expect(probe.count == 0)
            clock.advance(to: clock.instant(.seconds(3_600)))
            _ = try await events.next { $0 == .succeeded("history", attempt: 1) }
            #expect(probe.count == 1)
            // Done: one-shot, as on iOS (the app submits the next one).
            #expect(scheduler.status(of: "history") == nil)
            #expect(scheduler.pendingRequests.isEmpty)
        }
        // Its window was one of the KeepAlive's ledger, under its identifier.
        #expect(keepAlive.ledger.history(named: "deferred history").map(\.outcome) == [.completed])
    }

    @Test func heldWhileTheNetworkIsDownAndStartedWhenItComesBack() async throws {
        let keepAlive = try makeKeepAlive()
        let network = ConditionSwitch(false)
        let scheduler = try makeScheduler(keepAlive, network: network)
        let probe = Probe()
        let events = Collector(scheduler.events())
        try scheduler.register("history", kind: .processing, handler: probe.handler)
        try scheduler.submit(DeferredTaskRequest(identifier: "history", kind: .processing, requiresNetwork: true))
        try await whileRunning(scheduler) {
            try await waitUntil("held") { scheduler.status(of: "history") == .held([.network]) }
            clock.advance(by: .seconds(600))
            #expect(probe.count == 0)
            network.set(true)
            _ = try await events.next { $0 == .succeeded("history", attempt: 1) }
            #expect(probe.count == 1)
        }
    }

    @Test func heldOnBatteryAndStartedOnMains() async throws {
        let power = MockPowerSource(.lowPower)
        let keepAlive = try makeKeepAlive(power: power)
        let scheduler = try makeScheduler(keepAlive)
        let probe = Probe()
        let events = Collector(scheduler.events())
        try scheduler.register("history", kind: .processing, handler: probe.handler)
        try scheduler.submit(
            DeferredTaskRequest(identifier: "history", kind: .processing, requiresExternalPower: true))
        // A refresh task does not wait for power, and cannot ask to.
        try scheduler.register("clock", kind: .refresh, handler: Probe().handler)
        #expect(throws: DeferredTaskError.self) {
            try scheduler.submit(DeferredTaskRequest(identifier: "clock", kind: .refresh, requiresExternalPower: true))
        }
        try await whileRunning(scheduler) {
            try await power.waitForSubscriber()
            try await waitUntil("held") { scheduler.status(of: "history") == .held([.externalPower]) }
            power.set(.critical)
            #expect(scheduler.status(of: "history") == .held([.externalPower]))
            power.set(.normal)
            _ = try await events.next { $0 == .succeeded("history", attempt: 1) }
            #expect(probe.count == 1)
        }
    }

    // MARK: How it ends

    @Test func expiredAtTheBudgetWithItsExpirationHandlerThenRetried() async throws {
        let keepAlive = try makeKeepAlive()
        let scheduler = try makeScheduler(keepAlive)
        let expired = Atomic(0)
        let events = Collector(scheduler.events())
        try scheduler.register("history", kind: .processing) { task in
            task.expirationHandler = { expired.add(1, ordering: .relaxed) }
            try await clock.sleep(until: clock.instant(.seconds(3_600)))  // far past the budget; cancellable
        }
        try scheduler.submit(DeferredTaskRequest(identifier: "history", kind: .processing, budget: .seconds(120)))
        try await whileRunning(scheduler) {
            _ = try await events.next { $0 == .started("history", attempt: 1) }
            // The ledger's warning 10 s before the deadline, then the deadline.
            try await clock.waitForSleeper(until: clock.instant(.seconds(110)))
            clock.advance(to: clock.instant(.seconds(110)))
            try await clock.waitForSleeper(until: clock.instant(.seconds(120)))
            clock.advance(to: clock.instant(.seconds(120)))
            let failed = try await events.next { if case .failed = $0 { true } else { false } }
            guard case .failed(let error, let attempt, let retryAt) = failed else { return }
            #expect(error.code == .expired)
            #expect(error.description.contains("budget (2m)"), "\(error)")
            #expect(attempt == 1)
            #expect(retryAt == .at(.seconds(180)), "60 s after the failure")
            #expect(expired.load(ordering: .relaxed) == 1)
            #expect(scheduler.status(of: "history") == .waiting(until: .at(.seconds(180)), failures: 1))
        }
        #expect(keepAlive.ledger.history(named: "deferred history").map(\.outcome) == [.expired])
    }

    @Test func aFailureIsRetriedWithBackoffThenGivenUp() async throws {
        let keepAlive = try makeKeepAlive()
        let scheduler = try makeScheduler(keepAlive, maxAttempts: 3)
        let runs = Atomic(0)
        let events = Collector(scheduler.events())
        struct Broken: Error {}
        try scheduler.register("history", kind: .processing) { _ in
            runs.add(1, ordering: .relaxed)
            throw Broken()
        }
        try scheduler.submit(DeferredTaskRequest(identifier: "history", kind: .processing))
        try await whileRunning(scheduler) {
            var retries: [KeepAliveInstant?] = []
            for attempt in 1...3 {
                let failed = try await events.next { if case .failed = $0 { true } else { false } }
                guard case .failed(let error, let number, let retryAt) = failed else { return }
                #expect(error.code == .failed && error.message.contains("Broken"))
                #expect(number == attempt)
                retries.append(retryAt)
                if let retryAt {
                    try await clock.waitForSleeper(until: TestClock.Instant(retryAt))
                    clock.advance(to: TestClock.Instant(retryAt))
                }
            }
            // 60 s after the first failure, 120 s after the second, and no fourth run.
            #expect(retries == [.at(.seconds(60)), .at(.seconds(180)), nil])
            #expect(scheduler.status(of: "history") == nil)
        }
        #expect(runs.load(ordering: .relaxed) == 3)
    }

    @Test func setTaskCompletedDecidesWhateverTheHandlerDoesAfter() async throws {
        let keepAlive = try makeKeepAlive()
        let scheduler = try makeScheduler(keepAlive)
        let events = Collector(scheduler.events())
        struct Late: Error {}
        try scheduler.register("a", kind: .refresh) { task in
            task.setTaskCompleted(success: true)
            throw Late()
        }
        try scheduler.register("b", kind: .refresh) { task in
            task.setTaskCompleted(success: false)
        }
        try await whileRunning(scheduler) {
            try scheduler.submit(DeferredTaskRequest(identifier: "a", kind: .refresh))
            _ = try await events.next { $0 == .succeeded("a", attempt: 1) }
            try scheduler.submit(DeferredTaskRequest(identifier: "b", kind: .refresh))
            let failed = try await events.next { if case .failed = $0 { true } else { false } }
            guard case .failed(let error, _, _) = failed else { return }
            #expect(error.identifier == "b" && error.message.contains("completed it with failure"))
        }
    }

    // MARK: One at a time

    @Test func oneRunOfAnIdentifierAtATimeAndASecondSubmissionReplacesTheFirst() async throws {
        let keepAlive = try makeKeepAlive()
        let scheduler = try makeScheduler(keepAlive)
        let probe = Probe(holds: true)
        let events = Collector(scheduler.events())
        try scheduler.register("history", kind: .refresh, handler: probe.handler)
        // A refresh task: processing tasks are one at a time anyway. Two submissions before the run: the second
        // replaces the first.
        try scheduler.submit(
            DeferredTaskRequest(identifier: "history", kind: .refresh, earliestBegin: .at(.seconds(600))))
        try scheduler.submit(DeferredTaskRequest(identifier: "history", kind: .refresh, budget: .seconds(20)))
        #expect(scheduler.pendingRequests.map(\.budget) == [.seconds(20)])
        try await whileRunning(scheduler) {
            try await waitUntil("the first run in its handler") { probe.count == 1 }
            // Submitted again while it runs: it waits for the run to end, never a second run beside it.
            try scheduler.submit(DeferredTaskRequest(identifier: "history", kind: .refresh))
            guard case .running(attempt: 1, _)? = scheduler.status(of: "history") else {
                Issue.record("\(String(describing: scheduler.status(of: "history")))")
                return
            }
            clock.advance(by: .seconds(10))
            #expect(probe.count == 1)
            probe.gate.open()
            _ = try await events.next { $0 == .succeeded("history", attempt: 1) }
            _ = try await events.next { $0 == .succeeded("history", attempt: 1) }
            #expect(probe.count == 2)
        }
        let runs = events.all.filter { event in
            switch event {
            case .started, .succeeded: true
            default: false
            }
        }
        #expect(
            runs == [
                .started("history", attempt: 1), .succeeded("history", attempt: 1), .started("history", attempt: 1),
                .succeeded("history", attempt: 1),
            ])
        let windows = keepAlive.ledger.history(named: "deferred history")
        #expect(windows.count == 2)
        #expect(windows[1].began >= windows[0].ended, "the second run began after the first ended")
    }

    @Test func oneProcessingTaskAtATimeWhileRefreshesGoOn() async throws {
        let keepAlive = try makeKeepAlive()
        let scheduler = try makeScheduler(keepAlive)
        let first = Probe(holds: true)
        let second = Probe()
        let light = Probe()
        let events = Collector(scheduler.events())
        try scheduler.register("history.fern", kind: .processing, handler: first.handler)
        try scheduler.register("history.rose", kind: .processing, handler: second.handler)
        try scheduler.register("clock", kind: .refresh, handler: light.handler)
        try scheduler.submit(DeferredTaskRequest(identifier: "history.fern", kind: .processing))
        try scheduler.submit(DeferredTaskRequest(identifier: "history.rose", kind: .processing))
        try scheduler.submit(DeferredTaskRequest(identifier: "clock", kind: .refresh))
        try await whileRunning(scheduler) {
            _ = try await events.next { $0 == .succeeded("clock", attempt: 1) }
            #expect(scheduler.status(of: "history.rose") == .queued)
            #expect(second.count == 0)
            first.gate.open()
            _ = try await events.next { $0 == .succeeded("history.rose", attempt: 1) }
        }
    }

    @Test func neverTwoLinksToOneDeviceThroughTheGateThePollsUse() async throws {
        let keepAlive = try makeKeepAlive()
        let gate = DeviceGate()
        let scheduler = try makeScheduler(keepAlive, gate: gate)
        let insideWhileHeld = Atomic(false)
        let events = Collector(scheduler.events())
        try scheduler.register("history.fern", kind: .processing) { _ in
            #expect(gate.isBusy("fern"))
            insideWhileHeld.store(true, ordering: .relaxed)
        }
        // A poll of fern holds the device.
        try await gate.enter("fern")
        try scheduler.submit(DeferredTaskRequest(identifier: "history.fern", kind: .processing, device: "fern"))
        try await whileRunning(scheduler) {
            _ = try await events.next { $0 == .started("history.fern", attempt: 1) }
            clock.advance(by: .seconds(30))
            let inside = insideWhileHeld.load(ordering: .relaxed)
            #expect(!inside, "the task waits for the poll to end")
            gate.leave("fern")
            _ = try await events.next { $0 == .succeeded("history.fern", attempt: 1) }
            #expect(!gate.isBusy("fern"), "and frees the device when it ends")
        }
    }

    // MARK: Submissions and restarts

    @Test func submissionsThatCannotWorkAreRefusedWithTheReason() throws {
        let keepAlive = try makeKeepAlive()
        let scheduler = try makeScheduler(keepAlive)
        #expect {
            try scheduler.submit(DeferredTaskRequest(identifier: "nobody", kind: .refresh))
        } throws: { ($0 as? DeferredTaskError)?.code == .unregistered }
        try scheduler.register("clock", kind: .refresh) { _ in }
        #expect {
            try scheduler.register("clock", kind: .refresh) { _ in }
        } throws: { ($0 as? DeferredTaskError)?.code == .alreadyRegistered }
        #expect {
            try scheduler.submit(DeferredTaskRequest(identifier: "clock", kind: .refresh, budget: .seconds(31)))
        } throws: { "\($0)".contains("at most 30s for a refresh task") }
        #expect {
            try scheduler.submit(DeferredTaskRequest(identifier: "clock", kind: .processing))
        } throws: { "\($0)".contains("registered for refresh tasks") }
        #expect(scheduler.pendingRequests.isEmpty)
    }

    @Test func pendingRequestsSurviveARestartOnTheWallClock() async throws {
        let directory = NSTemporaryDirectory() + "deferred-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = FileDeferredTaskStore(path: directory + "/deferred.json")
        let wall = Atomic<Int64>(1_764_400_000)  // seconds since the epoch
        let wallClock: @Sendable () -> Duration = { .seconds(wall.load(ordering: .relaxed)) }

        let first = try makeScheduler(try makeKeepAlive(), store: store, wallClock: wallClock)
        try first.register("history.fern", kind: .processing) { _ in }
        try first.submit(
            DeferredTaskRequest(
                identifier: "history.fern", kind: .processing, earliestBegin: .at(.seconds(3_600)),
                requiresNetwork: true, requiresExternalPower: true, budget: .seconds(900), device: "fern"))
        let text = try String(contentsOfFile: store.path, encoding: .utf8)
        #expect(text.contains("\"earliestBegin\":1764403600000"), "\(text)")

        // Restarted 20 minutes later (wall clock), on a new monotonic clock starting at 0.
        wall.store(1_764_401_200, ordering: .relaxed)
        let second = try makeScheduler(try makeKeepAlive(), store: store, wallClock: wallClock)
        let request = try #require(second.pendingRequests.first)
        #expect(request.earliestBegin == .at(.seconds(2_400)), "what was left of the hour")
        #expect(request.device == "fern" && request.requiresNetwork && request.requiresExternalPower)
        #expect(request.budget == .seconds(900))
        #expect(second.status(of: "history.fern") == .unregistered)
        second.cancel("history.fern")
        #expect(try store.load().isEmpty)
    }

    /// A thousand requests (a gateway with 500 sensors, each with history and clock sync: 185 KB) come back as
    /// they were saved, every millisecond of their times kept. Read with the network's 16-KiB bound, a list this
    /// long was moved aside as "not JSON" at the next start; written as a `Double` truncated, 55 of these times
    /// came back a millisecond early.
    @Test func theStoreKeepsAThousandRequestsToTheMillisecond() throws {
        let directory = NSTemporaryDirectory() + "deferred-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = FileDeferredTaskStore(path: directory + "/deferred.json")
        let tasks = (0..<1_000).map { offset in
            StoredDeferredTask(
                request: DeferredTaskRequest(
                    identifier: "history.sensor-\(offset)", kind: .processing, requiresNetwork: true,
                    requiresExternalPower: true, budget: .milliseconds(600_000 + offset), device: "sensor-\(offset)"),
                earliestBeginWall: .milliseconds(1_796_018_146_000 + offset), failures: offset % 3)
        }
        try store.save(tasks)
        #expect(try store.load() == tasks)
    }

    @Test func aRunCutShortByAShutdownStaysPendingAsItWas() async throws {
        let keepAlive = try makeKeepAlive()
        let scheduler = try makeScheduler(keepAlive)
        let events = Collector(scheduler.events())
        try scheduler.register("history", kind: .processing) { _ in
            try await clock.sleep(until: clock.instant(.seconds(3_600)))
        }
        try scheduler.submit(DeferredTaskRequest(identifier: "history", kind: .processing))
        let task = Task { try await scheduler.run() }
        _ = try await events.next { $0 == .started("history", attempt: 1) }
        task.cancel()
        try? await task.value
        _ = try await events.next { $0 == .interrupted("history") }
        #expect(scheduler.pendingRequests.map(\.identifier) == ["history"])
        #expect(scheduler.status(of: "history") == .queued)
    }

    @Test func aStoreThatCannotBeReadIsMovedAsideAndSaysWhere() throws {
        let directory = NSTemporaryDirectory() + "deferred-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/deferred.json"
        try "{\"version\":1,\n \"tasks\":[}".write(toFile: path, atomically: true, encoding: .utf8)
        #expect {
            try FileDeferredTaskStore(path: path).load()
        } throws: { error in
            "\(error)".contains("\(path): not JSON (line 2, column 11") && "\(error)".contains("moved aside")
        }
        #expect(FileManager.default.fileExists(atPath: path + ".corrupt"))
        #expect(try FileDeferredTaskStore(path: path).load().isEmpty)
    }

    // MARK: The DocC article's sample

    /// `KeepAlive.docc/DeferredTasks.md`, "From BGTaskScheduler": the same lines, compiled and run here.
    @Test func theArticlesSample() async throws {
        let keepAlive = try makeKeepAlive()
        let fetched = Atomic(0)
        @Sendable func fetchAndProcessData() async throws { fetched.add(1, ordering: .relaxed) }
        let ran = Task {
            // The article's sample, from here…
            let network = ConditionSwitch(false)  // set it from your connection's callbacks
            let scheduler = try DeferredTaskScheduler(keepAlive: keepAlive, network: network)

            try scheduler.register("com.yourapp.refresh", kind: .processing) { task in
                task.expirationHandler = { print("out of time") }
                try await fetchAndProcessData()  // cancelled at the budget
                task.setTaskCompleted(success: true)
            }
            var request = DeferredTaskRequest(identifier: "com.yourapp.refresh", kind: .processing)
            request.requiresNetwork = true
            request.earliestBegin = scheduler.now + .seconds(30 * 60)
            try scheduler.submit(request)
            // …to here, but for `run()`, which this test runs in its own task.
            return (scheduler, network)
        }
        let (scheduler, network) = try await ran.value
        let events = Collector(scheduler.events())
        try await whileRunning(scheduler) {
            try await clock.waitForSleeper(until: clock.instant(.seconds(1_800)))
            clock.advance(to: clock.instant(.seconds(1_800)))
            try await waitUntil("held for the network") {
                scheduler.status(of: "com.yourapp.refresh") == .held([.network])
            }
            network.set(true)
            _ = try await events.next { $0 == .succeeded("com.yourapp.refresh", attempt: 1) }
        }
        #expect(fetched.load(ordering: .relaxed) == 1)
    }
}
