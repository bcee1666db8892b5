import Synchronization
import KeepAlive
import KeepAliveTesting

/// Buffers everything a stream yields so a test can wait for the next element that matches, with a real-time
/// safety timeout (a failing test reports instead of hanging).
final class Collector<Element: Sendable>: Sendable {
    struct Timeout: Error, CustomStringConvertible {
        var description: String
    }

    private struct State {
        var elements: [Element] = []
        var cursor = 0
        var waiter: (predicate: @Sendable (Element) -> Bool, continuation: CheckedContinuation<Element?, Never>)?
    }

    private let state = Mutex(State())
    private let consumer = Mutex<Task<Void, Never>?>(nil)

    init(_ stream: AsyncStream<Element>) {
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

    var all: [Element] {
        state.withLock { $0.elements }
    }

    /// The next element (after the last one returned) that matches.
    func next(
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
                try? await Task.sleep(for: timeout)  // safety net only
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

extension TestClock.Instant {
    init(_ instant: KeepAliveInstant) {
        self.init(offset: instant.offset)
    }
}

extension KeepAliveInstant {
    static func at(_ duration: Duration) -> KeepAliveInstant {
        KeepAliveInstant(offset: duration)
    }
}

extension TestClock {
    func instant(_ duration: Duration) -> TestClock.Instant {
        TestClock.Instant(offset: duration)
    }
}

extension TickReport {
    var ran: Bool {
        if case .ran = outcome { return true }
        return false
    }

    var skipReason: SkipReason? {
        if case .skipped(let reason) = outcome { return reason }
        return nil
    }

    var windowRecord: BackgroundTaskRecord? {
        if case .ran(_, let window) = outcome { return window }
        return nil
    }
}

/// A handler that blocks until the test opens it, ignoring cancellation (a callback that misbehaves).
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let open = state.withLock { state in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if open { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// Runs a scheduler in the background for the duration of a test.
func withRunning<T>(_ keepAlive: KeepAlive, _ body: () async throws -> T) async throws -> T {
    let task = Task { try await keepAlive.run() }
    do {
        let result = try await body()
        task.cancel()
        try? await task.value
        return result
    } catch {
        task.cancel()
        try? await task.value
        throw error
    }
}
