import Synchronization
import Basics

/// Fans one sequence of events out to any number of `AsyncStream` subscribers.
///
/// Publishing with no subscriber costs one uncontended lock; a slow subscriber keeps the newest
/// `bufferSize` events and never blocks the publisher (the scheduler must not wait on an observer).
package final class Broadcast<Element: Sendable>: Sendable {
    private let subscribers = Locked<[UInt64: AsyncStream<Element>.Continuation]>([:])
    private let nextID = Atomic<UInt64>(0)
    private let bufferSize: Int

    package init(bufferSize: Int = 4_096) {
        self.bufferSize = bufferSize
    }

    package func subscribe() -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: Element.self,
            bufferingPolicy: .bufferingNewest(bufferSize)
        )
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        subscribers.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    package var hasSubscribers: Bool {
        subscribers.withLock { !$0.isEmpty }
    }

    package func publish(_ element: Element) {
        let targets = subscribers.withLock { Array($0.values) }
        for continuation in targets {
            continuation.yield(element)
        }
    }

    package func finish() {
        let targets = subscribers.withLock { subscribers in
            defer { subscribers.removeAll() }
            return Array(subscribers.values)
        }
        for continuation in targets {
            continuation.finish()
        }
    }
}
