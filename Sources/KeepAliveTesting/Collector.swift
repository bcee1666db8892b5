import Basics

/// Buffers everything a stream yields so a test can wait for the next element that matches, with a real-time
/// safety timeout (a failing test reports instead of hanging).
///
/// ```swift
/// let records = Collector(engine.records())
/// let first = try await records.next { $0.tick == 0 }
/// ```
public final class Collector<Element: Sendable>: Sendable {
    public struct Timeout: Error, CustomStringConvertible {
        public var description: String
    }

    private struct State {
        var elements: [Element] = []
        var cursor = 0
        var waiter: (predicate: @Sendable (Element) -> Bool, continuation: CheckedContinuation<Element?, Never>)?
    }

    private let state = Locked(State())
    private let consumer = Locked<Task<Void, Never>?>(nil)

    public init(_ stream: AsyncStream<Element>) {
        let task = Task { [weak self] in
            for await element in stream {
                guard let self else { return }
                let resume: CheckedContinuation<Element?, Never>? = self.state.withLock { state in
                    state.elements.append(element)
                    guard let waiter = state.waiter else { return nil }
                    if let index = state.elements[state.cursor...].firstIndex(where: waiter.predicate) {
                        state.cursor = index + 1
                        state.waiter = nil
                        return waiter.continuation
                    }
                    return nil
                }
                resume?.resume(returning: element)
            }
        }
        consumer.withLock { $0 = task }
    }

    deinit {
        consumer.withLock { $0?.cancel() }
    }

    /// Everything received so far, in order.
    public var all: [Element] {
        state.withLock { $0.elements }
    }

    /// The next element (after the last one returned) that matches.
    public func next(
        timeout: Duration = .seconds(10),
        where predicate: @escaping @Sendable (Element) -> Bool = { _ in true }
    ) async throws -> Element {
        let result: Element? = await withTaskGroup(of: Element?.self) { group in
            group.addTask {
                await withCheckedContinuation { (continuation: CheckedContinuation<Element?, Never>) in
                    let found: Element? = self.state.withLock { state in
                        if let index = state.elements[state.cursor...].firstIndex(where: predicate) {
                            state.cursor = index + 1
                            return state.elements[index]
                        }
                        state.waiter = (predicate, continuation)
                        return nil
                    }
                    if let found { continuation.resume(returning: found) }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout * safetyNetScale)  // safety net only
                return nil
            }
            let first = await group.next() ?? nil
            if first == nil {
                let waiter = self.state.withLock { state in
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.continuation.resume(returning: nil)
            }
            group.cancelAll()
            return first
        }
        guard let result else {
            throw Timeout(description: "no matching element within \(timeout); saw \(all.count) elements")
        }
        return result
    }
}

