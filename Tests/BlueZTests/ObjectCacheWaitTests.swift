@testable import BlueZ
import DBus
import LocalServices
import TestHarness
import KeepAlive
import Polling
import KeepAliveTesting
import Testing

/// A wait on the tree keeps its deadline as one call on the clock's timer thread (no task group, no sleeping
/// task): it must end the wait at the deadline, and be taken back when the wait ends any other way, so that it
/// wakes nobody.
@Suite("BlueZ object cache: a wait's deadline on the timer thread", .serialized)
struct ObjectCacheWaitTests {
    typealias H = TransportHarness

    /// A cache of its own on the harness's bus, on a timer thread of its own (its wakeups are this test's only).
    static func withCache(_ body: @Sendable (H, BlueZObjectCache, TimerFDClock) async throws -> Void) async throws {
        try await H.with { h in
            let clock = TimerFDClock.isolated()
            let cache = BlueZObjectCache(connection: try await h.bus.connect(), clock: clock, logger: testLogger)
            let run = Task { try await cache.run() }
            defer { run.cancel() }
            try await cache.waitUntilReady(timeout: .seconds(10))
            try await body(h, cache, clock)
        }
    }

    /// A wait whose check never holds, with a deadline a minute away, once its deadline is on the timer thread.
    static func waitThatNeverEnds(on cache: BlueZObjectCache, _ clock: TimerFDClock) async throws -> Task<
        Void, any Error
    > {
        let time = cache.time  // the cache's own origin: an instant means nothing on another TimeBase
        let wait = Task {
            try await cache.wait(until: time.now.advanced(by: .seconds(60)), for: "nothing") { _ in .waiting }
        }
        try await waitUntil("the wait's deadline is scheduled") { clock.armed.pending == 1 }
        return wait
    }

    @Test func aWaitNotSatisfiedEndsAtItsDeadlineWithATimeoutNamingWhatItWaitedFor() async throws {
        try await Self.withCache { _, cache, clock in
            let time = cache.time  // the cache's own origin: an instant means nothing on another TimeBase
            let deadline = time.now.advanced(by: .milliseconds(100))
            let error = await #expect(throws: TransportError.self) {
                try await cache.wait(until: deadline, for: "a flag that never comes") { _ in .waiting }
            }
            #expect(error?.code == .timeout)
            #expect(error?.message == "timed out waiting for a flag that never comes")
            #expect(time.now >= deadline)
            #expect(clock.wakeups == 1)
            #expect(clock.armed.pending == 0)
            #expect(cache.state.withLock { $0.watchers.isEmpty })
        }
    }

    @Test func aWaitSatisfiedByAChangeTakesItsDeadlineBack() async throws {
        try await Self.withCache { _, cache, clock in
            let path = try BlueZ.devicePath(H.sensor)
            let time = cache.time  // the cache's own origin: an instant means nothing on another TimeBase
            let wait = Task {
                try await cache.wait(until: time.now.advanced(by: .seconds(60)), for: "Connected") { tree in
                    tree.device(path)?.flag(.connected) == true ? .satisfied : .waiting
                }
            }
            try await waitUntil("the wait's deadline is scheduled") { clock.armed.pending == 1 }
            cache.update(path, BlueZ.deviceInterface, ["Connected": .boolean(true)])
            try await wait.value
            #expect(clock.armed.pending == 0, "the deadline was taken back")
            #expect(clock.armed.deadline == nil, "the timerfd is disarmed")
            #expect(clock.wakeups == 0)
        }
    }

    @Test func aCancelledWaitTakesItsDeadlineBackAndSaysSo() async throws {
        try await Self.withCache { _, cache, clock in
            let wait = try await Self.waitThatNeverEnds(on: cache, clock)
            wait.cancel()
            await #expect(throws: CancellationError.self) { try await wait.value }
            #expect(clock.armed.pending == 0)
            #expect(clock.wakeups == 0)
            #expect(cache.state.withLock { $0.watchers.isEmpty })
        }
    }

    @Test func aWaitEndedByBluetoothdLeavingTakesItsDeadlineBack() async throws {
        try await Self.withCache { h, cache, clock in
            let wait = try await Self.waitThatNeverEnds(on: cache, clock)
            await h.simulator.crash()
            await #expect {
                try await wait.value
            } throws: { error in
                (error as? TransportError)?.code == .serviceRestarted
            }
            #expect(clock.armed.pending == 0)
            #expect(clock.wakeups == 0)
            try await h.simulator.restart()
            try await cache.waitUntilReady(timeout: .seconds(10))
        }
    }
}
