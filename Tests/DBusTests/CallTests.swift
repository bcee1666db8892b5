import Foundation
import Testing
@testable import DBus
import Basics
import LocalServices
import TestHarness

extension DBusTests {
    @Suite struct Calls {
        @Test func errorRepliesKeepTheirDBusNameAndMessage() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let error = await #expect(throws: DBusError.self) { _ = try await EchoService.call(client, "Fail") }
                #expect(error?.code == .remote)
                #expect(error?.name == EchoService.errorName)
                #expect(error?.message == EchoService.errorText)
            }
        }

        @Test func unknownObjectsMethodsAndArgumentsGetStandardErrors() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                func errorName(
                    _ path: ObjectPath, _ interface: String?, _ method: String, _ arguments: [DBusValue] = []
                )
                    async -> String?
                {
                    do {
                        _ = try await client.call(
                            destination: EchoService.name, path: path, interface: interface, method: method,
                            arguments: arguments)
                        return nil
                    } catch let error as DBusError {
                        return error.name
                    } catch {
                        return "\(error)"
                    }
                }
                #expect(
                    await errorName("/nowhere", EchoService.interface, "Ping") == DBusError.StandardName.unknownObject)
                #expect(
                    await errorName(EchoService.path, EchoService.interface, "Nope")
                        == DBusError.StandardName.unknownMethod)
                #expect(
                    await errorName(EchoService.path, "org.example.Other", "Ping")
                        == DBusError.StandardName.unknownMethod)
                #expect(
                    await errorName(EchoService.path, EchoService.interface, "Delayed", [.string("x")])
                        == DBusError.StandardName.invalidArgs)
                // Without an interface, the member is found in any interface.
                #expect(await errorName(EchoService.path, nil, "Ping") == nil)
                // Peer.Ping is answered at any path.
                try await client.ping(destination: EchoService.name)
                let missing = await #expect(throws: DBusError.self) {
                    try await client.ping(destination: "org.example.Nobody")
                }
                #expect(missing?.name == DBusError.StandardName.serviceUnknown)
            }
        }

        @Test func aCallToAMethodThatNeverRepliesTimesOutAfterItsTimeout() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let clock = ContinuousClock()
                let start = clock.now
                let error = await #expect(throws: DBusError.self) {
                    _ = try await EchoService.call(client, "Never", timeout: .milliseconds(300))
                }
                let elapsed = clock.now - start
                #expect(error?.code == .timeout)
                #expect(error?.name == DBusError.StandardName.noReply)
                // It says which call went unanswered.
                #expect(
                    error?.message.contains("\(EchoService.interface).Never on \(EchoService.path)") == true,
                    "\(String(describing: error))")
                #expect(elapsed >= .milliseconds(290))
                #expect(elapsed < .seconds(2), "took \(elapsed)")
                // The connection still works.
                #expect(try await EchoService.call(client, "Echo", [.byte(1)]) == [.byte(1)])
            }
        }

        @Test func cancellingTheTaskCancelsAPendingCallPromptly() async throws {
            try await PrivateBus.with { bus in
                let service = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let call = Task { try await EchoService.call(client, "Never") }
                try await waitUntil("the service has the call") { await service.state.neverCalls == 1 }
                let clock = ContinuousClock()
                let start = clock.now
                call.cancel()
                let result = await call.result
                #expect(clock.now - start < .milliseconds(500))
                #expect(throws: CancellationError.self) { try result.get() }
                #expect(await client.replies.isEmpty)
                // A call made in an already cancelled task never leaves.
                let cancelled = Task {
                    withUnsafeCurrentTask { $0?.cancel() }
                    return try await EchoService.call(client, "Echo", [.byte(1)])
                }
                let cancelledResult = await cancelled.result
                #expect(throws: CancellationError.self) { try cancelledResult.get() }
            }
        }

        /// Catches: a `CallCancellation` that does not end its call at once, that cancels the waiting task instead of
        /// the call (the task could not go on), or that lets a call it cancelled before sending go out, from a task
        /// on the pool and one on the connection's thread, cancelled from another thread and from the connection's.
        @Test func aCallCancellationEndsItsCallAndNotItsTask() async throws {
            try await PrivateBus.with { bus in
                let service = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let executor = client.taskExecutor
                for (round, onThread) in [false, true, false, true].enumerated() {
                    let cancellation = CallCancellation()
                    let call = Task(executorPreference: onThread ? executor : nil) {
                        let outcome: Result<[DBusValue], any Error>
                        do {
                            outcome = .success(try await EchoService.call(client, "Never", cancellation: cancellation))
                        } catch {
                            outcome = .failure(error)
                        }
                        // The task was not cancelled: it goes on, and its next call is sent and answered.
                        #expect(!Task.isCancelled)
                        return (outcome, try await EchoService.call(client, "Echo", [.byte(7)]))
                    }
                    try await waitUntil("the service has the call") { await service.state.neverCalls == round + 1 }
                    let clock = ContinuousClock()
                    let start = clock.now
                    if round < 2 {
                        cancellation.cancel()
                    } else {
                        // From the connection's thread, as the object cache's signal handler does it.
                        await withTaskExecutorPreference(executor) { cancellation.cancel() }
                    }
                    let (outcome, next) = try await call.value
                    #expect(clock.now - start < .milliseconds(500))
                    #expect(throws: CancellationError.self) { try outcome.get() }
                    #expect(next == [.byte(7)])
                    #expect(cancellation.isCancelled)
                    #expect(await client.replies.isEmpty)
                }
                // Cancelled before the call: it never leaves.
                let before = await client.statistics.callsSent
                let early = CallCancellation()
                early.cancel()
                await #expect(throws: CancellationError.self) {
                    try await EchoService.call(client, "Echo", [.byte(1)], cancellation: early)
                }
                #expect(await client.statistics.callsSent == before)
                // A cancellation after its call ended changes nothing.
                let late = CallCancellation()
                #expect(try await EchoService.call(client, "Echo", [.byte(2)], cancellation: late) == [.byte(2)])
                late.cancel()
                #expect(try await EchoService.call(client, "Echo", [.byte(3)]) == [.byte(3)])
            }
        }

        /// Catches: a reply that comes after its call timed out or was cancelled handed to another waiting call
        /// (replies must be matched by serial), or left behind in the table of outstanding calls.
        @Test func aReplyComingAfterItsCallGaveUpIsDropped() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                // The service answers the first call at 150 ms, while the second (answered at ≈ 330 ms) waits.
                let timedOut = await #expect(throws: DBusError.self) {
                    _ = try await EchoService.call(client, "Delayed", [.uint32(150)], timeout: .milliseconds(30))
                }
                #expect(timedOut?.code == .timeout)
                #expect(try await EchoService.call(client, "Delayed", [.uint32(300)]) == [.uint32(300)])
                #expect(await client.replies.isEmpty)
                // The same after a cancellation.
                let cancelled = Task { try await EchoService.call(client, "Delayed", [.uint32(150)]) }
                try await waitUntil("the call is sent") { await client.replies.count == 1 }
                cancelled.cancel()
                await #expect(throws: CancellationError.self) { try await cancelled.value }
                #expect(try await EchoService.call(client, "Delayed", [.uint32(300)]) == [.uint32(300)])
                #expect(await client.replies.isEmpty)
            }
        }

        /// Catches: a task cancelled before it calls still sending its call when it runs on the connection's
        /// thread (the peer would run the method — a BlueZ Connect — for nobody), for each kind of caller.
        @Test func aCallFromAnAlreadyCancelledTaskIsNeverSent() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let before = await client.statistics.callsSent
                let callers: [@Sendable () async throws -> [DBusValue]] = [
                    { try await EchoService.call(client, "Echo", [.byte(1)]) },
                    {
                        try await withTaskExecutorPreference(client.taskExecutor) {
                            try await EchoService.call(client, "Echo", [.byte(1)])
                        }
                    },
                    { try await isolatedCall(client, "Echo", [.byte(1)]) },
                ]
                for caller in callers {
                    let task = Task {
                        withUnsafeCurrentTask { $0?.cancel() }
                        return try await caller()
                    }
                    await #expect(throws: CancellationError.self) { try await task.value }
                }
                #expect(await client.statistics.callsSent == before)
                #expect(await client.replies.isEmpty)
                #expect(try await EchoService.call(client, "Echo", [.byte(2)]) == [.byte(2)])
                #expect(await client.statistics.callsSent == before + 1)
            }
        }

        /// Catches: a reply handed to the wrong call, a call never ended or ended twice, and a table not empty
        /// afterwards, with many calls at once from every kind of caller (the pool, a task preferring the
        /// connection's thread, code isolated to the connection) mixed with timeouts, late replies and
        /// cancellations.
        @Test func manyCallsAtOnceFromEveryKindOfCallerEachGetTheirOwnOutcome() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let outcomes = Locked([String: Int]())
                try await bounded("every call ends", .seconds(60 * sanitizerSlowdown)) {
                    for round in UInt32(0)..<20 {
                        await withTaskGroup(of: Void.self) { group in
                            for id in (round * 50 + 1)...(round * 50 + 50) {
                                group.addTask {
                                    let outcome = await Self.outcome(ofCall: id, on: client)
                                    outcomes.withLock { $0[outcome, default: 0] += 1 }
                                }
                            }
                        }
                    }
                }
                let counts = outcomes.withLock { $0 }
                #expect(counts.values.reduce(0, +) == 1_000)
                #expect(Set(counts.keys).isSubset(of: ["reply", "timeout", "cancelled"]), "\(counts)")
                #expect((counts["reply"] ?? 0) > 500, "\(counts)")
                #expect(await client.replies.isEmpty)
            }
        }

        /// Call `id`: Echo, or Delayed for every fourth; a timeout of a few milliseconds for every fifth; the
        /// caller kind by `id % 3`; cancelled (at once or after a yield) for every seventh. Returns "reply" for
        /// its own reply, "timeout", "cancelled", or what else happened.
        private static func outcome(ofCall id: UInt32, on client: DBusConnection) async -> String {
            let method = id % 4 == 0 ? "Delayed" : "Echo"
            let arguments: [DBusValue] = id % 4 == 0 ? [.uint32(id % 7)] : [.uint32(id), .string("call \(id)")]
            let timeout: Duration = id % 5 == 0 ? .milliseconds(Int(id % 6)) : .seconds(20)
            let task = Task {
                switch id % 3 {
                case 0: return try await EchoService.call(client, method, arguments, timeout: timeout)
                case 1:
                    return try await withTaskExecutorPreference(client.taskExecutor) {
                        try await EchoService.call(client, method, arguments, timeout: timeout)
                    }
                default: return try await isolatedCall(client, method, arguments, timeout: timeout)
                }
            }
            if id % 7 == 0 {
                if id % 2 == 0 { await Task.yield() }
                task.cancel()
            }
            do {
                return try await task.value == arguments ? "reply" : "wrong reply"
            } catch let error as DBusError where error.code == .timeout {
                return "timeout"
            } catch is CancellationError {
                return "cancelled"
            } catch {
                return "\(error)"
            }
        }

        @Test func repliesMayComeBackOutOfOrder() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let order = OrderRecorder()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for milliseconds: UInt32 in [300, 10, 150] {
                        group.addTask {
                            _ = try await EchoService.call(client, "Delayed", [.uint32(milliseconds)])
                            await order.append(milliseconds)
                        }
                    }
                    try await group.waitForAll()
                }
                #expect(await order.values == [10, 150, 300])
            }
        }

        /// RSS is process-wide: with other suites running in parallel it measures them too. `make test` runs
        /// this test alone, in a process of its own, with `KEEPALIVE_MEMORY_TESTS=1`.
        @Test(
            .enabled(if: ProcessInfo.processInfo.environment["KEEPALIVE_MEMORY_TESTS"] == "1", "runs alone: make test"))
        func tenThousandCallsDoNotGrowMemory() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let arguments: [DBusValue] = [.string("payload"), .uint32(1)]
                for _ in 0..<2_000 { _ = try await EchoService.call(client, "Echo", arguments) }
                let before = residentSetKilobytes()
                for _ in 0..<10_000 { _ = try await EchoService.call(client, "Echo", arguments) }
                let after = residentSetKilobytes()
                #expect(before > 0)
                // A leak of one message or box per call would be several megabytes.
                #expect(after - before < 2_048, "RSS grew from \(before) kB to \(after) kB")
                #expect(await client.replies.isEmpty)
            }
        }
    }
}

actor OrderRecorder {
    var values: [UInt32] = []
    func append(_ value: UInt32) { values.append(value) }
}

/// A call made from code isolated to the connection (how the simulator and `DBusConnection`'s own methods call).
private func isolatedCall(
    _ client: isolated DBusConnection, _ method: String, _ arguments: [DBusValue], timeout: Duration = .seconds(25)
) async throws -> [DBusValue] {
    try await EchoService.call(client, method, arguments, timeout: timeout)
}
