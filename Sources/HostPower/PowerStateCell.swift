import KeepAlive
import Basics

/// The cached state of one source and the streams that follow it: what every source in this module keeps.
///
/// `set` publishes under the lock, so that each subscriber sees the changes in the order they were made even
/// when two tasks set at once; yielding to an `AsyncStream` never calls back into the cell, so this cannot
/// deadlock. The streams never finish while the cell lives (the contract of `PowerSource`).
final class PowerStateCell: Sendable {
    private struct Storage {
        var state: PowerState
        var subscribers: [UInt64: AsyncStream<PowerState>.Continuation] = [:]
        /// Tasks parked in `waitForSubscriber()` (the sysfs poller, which reads only while somebody listens).
        var subscriberWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextID: UInt64 = 0

        mutating func id() -> UInt64 {
            nextID += 1
            return nextID
        }
    }

    private let storage: Locked<Storage>

    init(_ initial: PowerState = .normal) {
        storage = Locked(Storage(state: initial))
    }

    deinit {
        let subscribers = storage.withLock { $0.subscribers.values }
        for continuation in subscribers { continuation.finish() }
    }

    var state: PowerState {
        storage.withLock { $0.state }
    }

    var hasSubscribers: Bool {
        storage.withLock { !$0.subscribers.isEmpty }
    }

    /// A new stream of every change from now on.
    func subscribe() -> AsyncStream<PowerState> {
        // Unbounded in practice: a state changes a few times an hour; the newest 64 are plenty for a slow reader.
        let (stream, continuation) = AsyncStream.makeStream(of: PowerState.self, bufferingPolicy: .bufferingNewest(64))
        let (id, waiters): (UInt64, [CheckedContinuation<Void, Never>]) = storage.withLock { storage in
            let id = storage.id()
            storage.subscribers[id] = continuation
            defer { storage.subscriberWaiters = [:] }
            return (id, Array(storage.subscriberWaiters.values))
        }
        // Set outside the lock: a handler set on a stream that already ended runs at once.
        continuation.onTermination = { [weak self] _ in
            _ = self?.storage.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        for waiter in waiters { waiter.resume() }
        return stream
    }

    /// Sets the state; yields it to every subscriber and returns true when it changed.
    @discardableResult
    func set(_ state: PowerState) -> Bool {
        storage.withLock { storage in
            guard storage.state != state else { return false }
            storage.state = state
            for continuation in storage.subscribers.values { continuation.yield(state) }
            return true
        }
    }

    /// Returns once somebody is subscribed (at once if somebody is), or when the task is cancelled.
    func waitForSubscriber() async {
        let id = storage.withLock { $0.id() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = storage.withLock { storage in
                    if !storage.subscribers.isEmpty || Task.isCancelled { return true }
                    storage.subscriberWaiters[id] = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            let waiter = storage.withLock { $0.subscriberWaiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }
}
