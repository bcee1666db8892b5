import Basics
import Testing

/// `Promise.valueUnlessCancelled()` is how a poll waits for its disconnect: it must return the result when it
/// comes, and nil at once when the waiting task is cancelled, without touching the result or the other waiters.
@Suite("Promise: waiting unless cancelled")
struct PromiseTests {
    @Test func aWaiterGetsTheResultWhenItComes() async throws {
        let promise = Promise<Int>()
        let waiter = Task { await promise.valueUnlessCancelled() }
        let plain = Task { try await promise.value() }
        promise.complete(.success(7))
        #expect(try await waiter.value?.get() == 7)
        #expect(try await plain.value == 7)
        // Completed already: at once, the first result kept.
        #expect(!promise.complete(.success(8)))
        #expect(try await promise.valueUnlessCancelled()?.get() == 7)
    }

    @Test func aCancelledWaiterStopsAtOnceAndTheOthersStillGetTheResult() async throws {
        let promise = Promise<Int>()
        let cancelled = Task { await promise.valueUnlessCancelled() }
        let other = Task { await promise.valueUnlessCancelled() }
        // Cancelled while waiting (or before it registered: both must end it).
        cancelled.cancel()
        #expect(await cancelled.value == nil)
        promise.complete(.success(3))
        #expect(try await other.value?.get() == 3)
    }

    @Test func aTaskCancelledBeforeItWaitsDoesNotWait() async {
        let promise = Promise<Void>()
        let result = await Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await promise.valueUnlessCancelled()
        }.value
        #expect(result == nil)
    }
}
