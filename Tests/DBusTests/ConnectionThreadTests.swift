import Basics
import Testing
@testable import DBus
import LocalServices
import TestHarness

extension DBusTests {
    /// The thread each connection runs on (`ConnectionThread`): its deadlines (libdbus's earliest timeout and
    /// the earliest call's), its queue, its task executor, and its end — with its `epoll` descriptor and
    /// `eventfd` — when the connection is closed, released or loses its bus.
    ///
    /// Every wait here is bounded (`bounded(_:_:_:)` in Support/Threads.swift gives up even on a body that never
    /// finishes: work the thread loses leaves a continuation never resumed, which `withTimeout` would wait for).
    @Suite struct ConnectionThreads {
        // MARK: The deadline

        /// Catches: a deadline fired when `epoll_wait` returns without looking at the clock (a millisecond
        /// timeout rounded down returns up to 1 ms early), and a deadline that never fires.
        @Test func aDeadlineNeverFiresBeforeItsTimeAndFiresSoonAfter() async throws {
            let thread = try ConnectionThread(name: "test-deadline")
            defer { thread.stop() }
            // Nanoseconds past the deadline when the handler ran.
            var latenesses: [Int64] = []
            // Sub-millisecond offsets, so that a timeout rounded the wrong way would show.
            for step in 0..<40 {
                let offset = Int64(1_000_000 + step * 370_000)
                let lateness = try await bounded("deadline \(step) fires") {
                    await withCheckedContinuation { continuation in
                        thread.async {
                            let deadline = ConnectionThread.now() + offset
                            // Both owners, in turn.
                            let owner: ConnectionThread.DeadlineOwner = step % 2 == 0 ? .libdbus : .calls
                            thread.setDeadlineHandler(for: owner) {
                                thread.setDeadlineHandler(for: owner, nil)
                                continuation.resume(returning: ConnectionThread.now() - deadline)
                            }
                            thread.setDeadline(deadline, for: owner)
                        }
                    }
                }
                latenesses.append(lateness)
            }
            #expect(latenesses.allSatisfy { $0 >= 0 }, "fired early (ns): \(latenesses.filter { $0 < 0 })")
            let worst = Duration.nanoseconds(latenesses.max() ?? 0)
            #expect(worst < .milliseconds(100 * sanitizerSlowdown), "latest by \(worst)")
        }

        /// Catches: one owner's deadline replacing the other's (the later one lost when the earlier fires, or
        /// cleared with it), and a cleared deadline that still fires.
        @Test func eachOwnerKeepsItsOwnDeadline() async throws {
            let thread = try ConnectionThread(name: "test-owners")
            defer { thread.stop() }
            let fired = Locked<[(ConnectionThread.DeadlineOwner, Int64)]>([])
            let order = try await bounded("both deadlines fire") {
                await withCheckedContinuation { continuation in
                    thread.async {
                        let start = ConnectionThread.now()
                        for owner in ConnectionThread.DeadlineOwner.allCases {
                            thread.setDeadlineHandler(for: owner) {
                                let count = fired.withLock { fired in
                                    fired.append((owner, ConnectionThread.now() - start))
                                    return fired.count
                                }
                                if count == 2 { continuation.resume(returning: fired.withLock { $0 }) }
                            }
                        }
                        // The later one set first, then the earlier; a third, cleared, must never fire.
                        thread.setDeadline(start + 60_000_000, for: .calls)
                        thread.setDeadline(start + 20_000_000, for: .libdbus)
                    }
                }
            }
            #expect(order.map(\.0) == [.libdbus, .calls])
            #expect(order[0].1 >= 20_000_000)
            #expect(order[1].1 >= 60_000_000)
            // Cleared before its time: nothing fires (the other owner's deadline, later, shows the thread went on).
            let late = try await bounded("the remaining deadline fires") {
                await withCheckedContinuation { continuation in
                    thread.async {
                        let start = ConnectionThread.now()
                        thread.setDeadlineHandler(for: .calls) { Issue.record("a cleared deadline fired") }
                        thread.setDeadlineHandler(for: .libdbus) {
                            continuation.resume(returning: ConnectionThread.now() - start)
                        }
                        thread.setDeadline(start + 10_000_000, for: .calls)
                        thread.setDeadline(start + 40_000_000, for: .libdbus)
                        thread.setDeadline(nil, for: .calls)
                    }
                }
            }
            #expect(late >= 40_000_000)
        }

        /// Catches: a timeout added after a later one that does not bring the deadline forward (the short call
        /// would wait for the long one), and a deadline not armed again after it fired.
        @Test func callsTimeOutOnTimeWhileTheConnectionIsIdle() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                // One at a time, then a long and a short one together (the short one armed second).
                for timeout in [Duration.milliseconds(150), .milliseconds(260)] {
                    let elapsed = try await timedOutCall(client, timeout: timeout)
                    #expect(elapsed >= timeout, "timed out after \(elapsed), before its \(timeout)")
                    #expect(elapsed < timeout + .milliseconds(250 * sanitizerSlowdown), "took \(elapsed)")
                }
                let long = Task { try await timedOutCall(client, timeout: .milliseconds(400)) }
                try await waitUntil("the long call is sent") { await client.replies.count == 1 }
                let shortElapsed = try await timedOutCall(client, timeout: .milliseconds(100))
                let longElapsed = try await bounded("the long call times out") { try await long.value }
                #expect(shortElapsed >= .milliseconds(100))
                #expect(shortElapsed < .milliseconds(100 + 250 * sanitizerSlowdown), "short one took \(shortElapsed)")
                #expect(longElapsed >= .milliseconds(400))
                #expect(longElapsed < .milliseconds(400 + 250 * sanitizerSlowdown), "long one took \(longElapsed)")
                #expect(await client.replies.isEmpty)
                #expect(try await EchoService.call(client, "Echo", [.byte(1)]) == [.byte(1)])
            }
        }

        /// Catches: the deadline looked at only when `epoll_wait` comes back empty — a socket that is readable
        /// on every wait (signals arriving faster than the client handles them) would hold a due timeout back
        /// for as long as the flood lasts.
        @Test func aCallTimesOutOnTimeDuringAFloodOfSignals() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let emitter = try await bus.connect()
                // A slow consumer (50 µs a signal, on the connection's thread), so that the socket never drains.
                let handled = Locked(0)
                let lastHandled = Locked(ContinuousClock.now)
                let handler = try await client.addSignalHandler(
                    matching: MatchRule(interface: "org.example.Flood"),
                    { _ in
                        spin(nanoseconds: 50_000)
                        handled.withLock { $0 += 1 }
                        lastHandled.withLock { $0 = .now }
                    }, onEnd: { _ in })
                let flooding = Locked(true)
                // Unicast: only the client gets them. A round trip to the bus every 64 keeps the emitter's
                // outgoing queue short.
                let flood = Task(executorPreference: emitter.taskExecutor) {
                    var sent = 0
                    while flooding.withLock({ $0 }) {
                        try await emitter.emitSignal(
                            path: "/org/example/Flood", interface: "org.example.Flood", member: "Tick",
                            arguments: [.uint32(UInt32(truncatingIfNeeded: sent))], destination: client.uniqueName)
                        sent += 1
                        if sent.isMultiple(of: 64) { try await emitter.ping(destination: "org.freedesktop.DBus") }
                    }
                    return sent
                }
                defer { flooding.withLock { $0 = false } }
                try await waitUntil("the flood reaches the client") { handled.withLock { $0 } > 500 }
                let handledBefore = handled.withLock { $0 }
                let timeout = Duration.milliseconds(300)
                let called = ContinuousClock.now
                let elapsed = try await timedOutCall(client, timeout: timeout)
                let handledDuring = handled.withLock { $0 } - handledBefore
                let floodedUntil = lastHandled.withLock { $0 }
                flooding.withLock { $0 = false }
                let sent = try await bounded("the flood stops") { try await flood.value }
                client.removeSignalHandler(handler)
                // The flood was real for the whole wait: signals kept being handled up to the deadline (how many
                // depends on the machine's load: 881 to 5,000 in 300 ms on two shared cores).
                #expect(handledDuring > 100, "only \(handledDuring) signals were handled while the call waited")
                #expect(
                    floodedUntil >= called + timeout - .milliseconds(100),
                    "the flood stopped \(called + timeout - floodedUntil) before the deadline")
                #expect(elapsed >= timeout, "timed out after \(elapsed), before its \(timeout)")
                #expect(elapsed < timeout + .milliseconds(300 * sanitizerSlowdown), "took \(elapsed)")
                #expect(sent > handledDuring)
            }
        }

        /// Catches: the deadline (and the socket) looked at only when the queue is empty — work that keeps
        /// queueing work would hold a due timeout back for as long as it goes on.
        @Test func aCallTimesOutOnTimeWhileWorkIsQueuedWithoutPause() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let chain = BusyChain(on: client.executor)
                chain.start()
                defer { chain.stop() }
                try await waitUntil("the chain runs") { chain.steps > 100 }
                let timeout = Duration.milliseconds(200)
                let elapsed = try await timedOutCall(client, timeout: timeout)
                let steps = chain.steps
                chain.stop()
                #expect(steps > 1_000, "the chain ran only \(steps) steps")
                #expect(elapsed >= timeout, "timed out after \(elapsed), before its \(timeout)")
                #expect(elapsed < timeout + .milliseconds(300 * sanitizerSlowdown), "took \(elapsed)")
                #expect(try await EchoService.call(client, "Echo", [.byte(2)]) == [.byte(2)])
            }
        }

        // MARK: The queue

        /// Catches: blocks, task jobs and actor jobs kept in separate queues (or one kind let ahead), a batch
        /// run out of order, work queued across `stop()` and the restart after it reordered or lost, and any of
        /// it run elsewhere than on the thread.
        @Test func blocksTaskJobsAndActorJobsRunInTheOrderTheyWereQueued() async throws {
            let thread = try ConnectionThread(name: "test-fifo")
            defer { thread.stop() }
            let recorder = Recorder(thread: thread)
            let log = RunLog(thread: thread)
            let count = 300
            // From one thread outside: blocks and jobs of tasks that prefer the thread, interleaved; a stop()
            // in the middle (what follows restarts the thread).
            for index in 0..<count {
                if index == count / 2 { thread.stop() }
                if index.isMultiple(of: 2) {
                    thread.async { log.record(index) }
                } else {
                    Task(executorPreference: thread.taskExecutor) { log.record(index) }
                }
            }
            try await waitUntil("the outside work has run") { log.indices.count == count }
            #expect(log.indices == Array(0..<count))
            #expect(log.offThread == 0, "\(log.offThread) ran off the thread")

            // From the thread itself, actor jobs too (tasks isolated to an actor whose executor it is).
            log.reset()
            thread.async {
                recorder.assumeIsolated { recorder in
                    for index in 0..<count {
                        switch index % 3 {
                        case 0: Recorder.startTask(on: recorder, index, log)
                        case 1: Task(executorPreference: thread.taskExecutor) { log.record(index) }
                        default: thread.async { log.record(index) }
                        }
                    }
                }
            }
            try await waitUntil("the inside work has run") { log.indices.count == count }
            #expect(log.indices == Array(0..<count))
            #expect(log.offThread == 0, "\(log.offThread) ran off the thread")
        }

        /// Catches: a thread that goes on waiting after `stop()`, and work queued after its end that is lost
        /// (no thread started for it) or runs where the executor does not recognise itself.
        @Test func aStoppedThreadEndsAndLateWorkStartsAnother() async throws {
            let thread = try ConnectionThread(name: "test-restart")
            let first = try await Threads.id(of: thread)
            #expect(Threads.exists(first))
            thread.stop()
            try await waitUntil("the thread ends") { !Threads.exists(first) }
            for _ in 0..<3 {
                let (id, isCurrent) = try await bounded("late work runs") {
                    await withCheckedContinuation { continuation in
                        thread.async { continuation.resume(returning: (Threads.currentID(), thread.isCurrent)) }
                    }
                }
                #expect(isCurrent)
                #expect(id != first)
                try await waitUntil("the thread started for it ends too") { !Threads.exists(id) }
            }
        }

        /// Catches: late work for a stopped connection lost, or the process trapped, when no thread can be
        /// started for it (out of threads): it runs on a borrowed thread, as the connection's thread.
        @Test func outOfThreadsLateWorkRunsOnABorrowedThread() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let thread = client.executor
                let first = try await Threads.id(of: thread)
                await client.close()
                try await waitUntil("the thread ends") { !Threads.exists(first) }
                thread.failRestartsForTesting(3)
                // A block, an actor job and a call: each restart fails, and each still runs, in order.
                let isCurrent = try await bounded("late work runs") {
                    await withCheckedContinuation { continuation in
                        thread.async { continuation.resume(returning: thread.isCurrent) }
                    }
                }
                #expect(isCurrent)
                #expect(try await bounded("the actor answers") { await client.state } == .closed)
                let error = try await bounded("a late call fails") {
                    await #expect(throws: DBusError.self) { try await EchoService.call(client, "Echo", [.byte(1)]) }
                }
                #expect(error?.code == .disconnected)
            }
        }

        // MARK: The task executor

        /// Catches: jobs of a preferring task sent anywhere but the connection's thread, and a call made on the
        /// thread that waits for itself (its send queued behind the task that waits for the reply).
        @Test func aTaskPreferringTheConnectionsExecutorRunsOnItsThreadForAHundredCalls() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let thread = client.executor
                let (replies, offThread) = try await bounded("a hundred calls") {
                    try await withTaskExecutorPreference(client.taskExecutor) {
                        var replies = 0
                        var offThread = thread.isCurrent ? 0 : 1
                        for index in 0..<100 {
                            let value = DBusValue.uint32(UInt32(index))
                            if try await EchoService.call(client, "Echo", [value]) == [value] { replies += 1 }
                            if !thread.isCurrent { offThread += 1 }
                        }
                        return (replies, offThread)
                    }
                }
                #expect(replies == 100)
                #expect(offThread == 0, "\(offThread) of 101 steps ran off the connection's thread")
                #expect(await client.replies.isEmpty)
            }
        }

        /// `taskExecutor` may outlive its connection: a task started with it, or a preference taken from it, can
        /// run on after everyone else has let go of the connection (a poll started before a reconnection).
        /// Catches: a task executor that does not keep its thread alive (with an `unowned(unsafe)` back reference
        /// in `ConnectionThread.TaskRole` its job was queued on a freed thread object: a crash in
        /// `TaskRole.enqueue`, or a corrupted heap for the rest of the run).
        @Test
        func aTaskExecutorOutlivesItsConnection() async throws {
            try await PrivateBus.with { bus in
                var client: DBusConnection? = try await DBusConnection(bus: .address(bus.address))
                weak let released = client
                let executor = try #require(client).executor
                let taskExecutor = try #require(client).taskExecutor
                let id = try await Threads.id(of: executor)
                _ = consume executor
                await client?.close()
                client = nil
                try await waitUntil("the connection is released") { released == nil }
                try await waitUntil("its thread ends") { !Threads.exists(id) }
                let ran = try await bounded("a task preferring the executor runs") {
                    await withTaskExecutorPreference(taskExecutor) {
                        await Task.yield()
                        return true
                    }
                }
                #expect(ran)
            }
        }

        // MARK: The end of a connection

        /// Catches: a closed connection's thread that goes on waiting, a call on a closed connection that waits
        /// for a thread that has ended instead of failing at once, and descriptors (socket, epoll, eventfd) left
        /// open (a closed connection that is still referenced must hold none).
        @Test func closingEndsTheThreadAndLaterCallsFailWithDisconnected() async throws {
            try await PrivateBus.with { bus in
                let (threadsBefore, descriptorsBefore, kindsBefore) = try await startAndCount(bus)
                var clients: [DBusConnection] = []
                var ids: [Int32] = []
                for _ in 0..<3 {
                    let client = try await DBusConnection(bus: .address(bus.address))
                    #expect(try await EchoService.call(client, "Echo", [.byte(3)]) == [.byte(3)])
                    clients.append(client)
                    ids.append(try await Threads.id(of: client.executor))
                }
                let threadIDs = ids
                let executors = clients.map { Weak($0.executor) }
                let threadsOpen = Threads.count()
                let kindsOpen = Descriptors.kinds()
                for client in clients { await client.close() }
                try await waitUntil("the threads end") { threadIDs.allSatisfy { !Threads.exists($0) } }
                try await waitUntil("the thread count is back") { Threads.count() <= threadsBefore }
                #expect(Threads.count() <= threadsBefore, "threads: before \(threadsBefore), open \(threadsOpen)")

                do {
                    // A late call starts a thread for a moment, fails at once and lets it end again.
                    let (first, second) = (clients[0], clients[1])
                    let clock = ContinuousClock()
                    let start = clock.now
                    let error = try await bounded("a call on a closed connection fails") {
                        await #expect(throws: DBusError.self) { _ = try await EchoService.call(first, "Ping") }
                    }
                    #expect(error?.code == .disconnected)
                    #expect(clock.now - start < .milliseconds(200 * sanitizerSlowdown))
                    // Also from a task that prefers the closed connection's executor.
                    let preferring = try await bounded("a preferring call on a closed connection fails") {
                        await #expect(throws: DBusError.self) {
                            try await withTaskExecutorPreference(second.taskExecutor) {
                                _ = try await EchoService.call(second, "Ping")
                            }
                        }
                    }
                    #expect(preferring?.code == .disconnected)
                }
                try await waitUntil("the thread count is back after the late calls") {
                    Threads.count() <= threadsBefore
                }

                // Their threads have ended and their sockets are closed: a closed connection that is still
                // referenced should hold no descriptor at all.
                await Descriptors.expectBack(
                    to: descriptorsBefore,
                    "descriptors: before \(kindsBefore), open \(kindsOpen), closed \(Descriptors.kinds())")
                clients.removeAll()
                try await waitUntil("the executors are released") { executors.allSatisfy { $0.object == nil } }
                await Descriptors.expectBack(
                    to: descriptorsBefore,
                    "descriptors: before \(descriptorsBefore) \(kindsBefore), now \(Descriptors.kinds())")
            }
        }

        /// Catches: a reference cycle, or a thread that keeps its executor alive: the connection, its thread,
        /// its epoll descriptor and eventfd would then outlive the last reference for ever.
        @Test func aReleasedConnectionEndsItsThreadAndClosesItsDescriptors() async throws {
            try await PrivateBus.with { bus in
                let (threadsBefore, descriptorsBefore, kindsBefore) = try await startAndCount(bus)
                var client: DBusConnection? = try await DBusConnection(bus: .address(bus.address))
                weak let released = client
                let executor = Weak(try #require(client).executor)
                let id = try await Threads.id(of: try #require(client).executor)
                // Used first: a call, a signal stream, a task on its executor.
                let connection = try #require(client)
                #expect(try await EchoService.call(connection, "Echo", [.byte(4)]) == [.byte(4)])
                _ = try await connection.signals(matching: MatchRule(member: "NeverSent"))
                await withTaskExecutorPreference(connection.taskExecutor) { await Task.yield() }
                client = nil
                _ = consume connection
                try await waitUntil("the connection is released") { released == nil }
                try await waitUntil("its thread ends") { !Threads.exists(id) }
                try await waitUntil("its executor is released") { executor.object == nil }
                try await waitUntil("the thread count is back") { Threads.count() <= threadsBefore }
                await Descriptors.expectBack(
                    to: descriptorsBefore,
                    "descriptors: before \(descriptorsBefore) \(kindsBefore), now \(Descriptors.kinds())")
            }
        }

        /// Catches: a waiting task whose resumption is queued on the thread just as it stops and then never
        /// runs, a disconnected connection's thread that goes on waiting, and a disconnect that never reaches
        /// libdbus (the call would wait for its 25 s timeout). `BusLoss` covers a caller on the global pool.
        @Test func killingTheDaemonFailsACallWaitingOnTheConnectionsThreadAndEndsTheThread() async throws {
            try await PrivateBus.with { bus in
                let service = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let id = try await Threads.id(of: client.executor)
                // The call's own end is timed where it happens: `killDaemon` also waits for the killed process to
                // be reaped, which took over 2 s once beside the suite, while the call had already failed.
                let pending = Task(executorPreference: client.taskExecutor) {
                    () -> (Result<[DBusValue], any Error>, ContinuousClock.Instant) in
                    do {
                        return (.success(try await EchoService.call(client, "Never")), ContinuousClock.now)
                    } catch {
                        return (.failure(error), ContinuousClock.now)
                    }
                }
                try await waitUntil("the service has the call") { await service.state.neverCalls == 1 }
                let start = ContinuousClock.now
                try await bus.killDaemon()
                let (result, ended) = try await bounded("the waiting call fails") { await pending.value }
                #expect(
                    ended - start < .seconds(2 * sanitizerSlowdown), "the call ended \(ended - start) after the kill")
                if case .failure(let error as DBusError) = result {
                    #expect(error.code == .disconnected)
                } else {
                    Issue.record("expected .disconnected, got \(result)")
                }
                #expect(await client.state == .disconnected)
                try await waitUntil("the disconnected connection's thread ends") { !Threads.exists(id) }
            }
        }
    }
}

// MARK: Helpers

/// Calls the echo service's `Never` with `timeout`; returns how long it took to fail with `.timeout`.
private func timedOutCall(_ client: DBusConnection, timeout: Duration) async throws -> Duration {
    try await bounded("the call times out", timeout + .seconds(10)) {
        let clock = ContinuousClock()
        let start = clock.now
        do {
            _ = try await EchoService.call(client, "Never", timeout: timeout)
            Issue.record("the call to Never returned")
        } catch let error as DBusError {
            #expect(error.code == .timeout)
        }
        return clock.now - start
    }
}

/// Makes, uses and closes a connection and waits until it is gone, so that what the first connection starts
/// lazily (libdispatch's timers and threads, libdbus's globals) counts in the baselines and nothing of its own.
/// Starts the echo service and warms up (see `warmUp`), then counts the threads and descriptors the process has
/// before a test opens its own: (threads, descriptors, descriptors by kind).
private func startAndCount(_ bus: PrivateBus) async throws -> (Int, Int, [String: Int]) {
    _ = try await EchoService.start(on: bus)
    try await warmUp(bus)
    return (Threads.count(), Descriptors.openCount(), Descriptors.kinds())
}

private func warmUp(_ bus: PrivateBus) async throws {
    let (id, executor) = try await usedAndClosed(bus)
    try await waitUntil("the warm-up connection's thread ends") { !Threads.exists(id) }
    try await waitUntil("the warm-up connection's executor is released") { executor.object == nil }
}

private func usedAndClosed(_ bus: PrivateBus) async throws -> (Int32, Weak<ConnectionThread>) {
    let connection = try await DBusConnection(bus: .address(bus.address))
    _ = try await bounded("the warm-up call") { try await EchoService.call(connection, "Echo", [.byte(0)]) }
    let id = try await Threads.id(of: connection.executor)
    await connection.close()
    _ = try? await bounded("the warm-up's late call") { try await EchoService.call(connection, "Echo") }
    return (id, Weak(connection.executor))
}
