import CLinux
#if canImport(Glibc)
import Glibc
#endif
import Locking

/// One thread blocked in `read(2)` on one `timerfd` (`CLOCK_BOOTTIME`, absolute), armed for the earliest
/// pending deadline: every deadline reached costs exactly one wakeup, and a cancelled one costs none.
///
/// Why not `Task.sleep` or a `DispatchSourceTimer`: a cancelled `Task.sleep` still fires its libdispatch timer at
/// the original deadline, and a dispatch timer left armed for an answered call fires later too — each a wakeup
/// for nothing, between a daemon's ticks. `KeepAlive.TimerFDClock` sleeps here. (`DBus` does not: a
/// connection's thread passes its earliest call's deadline to `epoll_wait`.)
///
/// ```swift
/// let id = TimerThread.shared.schedule(at: TimerThread.now() + .seconds(25)) { queue.async { fire() } }
/// TimerThread.shared.cancel(id)                      // the reply came first: the thread is not woken
/// ```
package final class TimerThread: Sendable {
    /// The process's timer thread.
    package static let shared = TimerThread()

    private enum Action {
        case resume(CheckedContinuation<Void, any Error>)
        case call(@Sendable () -> Void)
    }

    private struct Entry: Comparable {
        var deadline: Duration
        var id: UInt64

        static func < (lhs: Entry, rhs: Entry) -> Bool {
            (lhs.deadline, lhs.id) < (rhs.deadline, rhs.id)
        }
    }

    private struct State {
        var heap = Heap<Entry>()
        var actions: [UInt64: Action] = [:]
        var nextID: UInt64 = 0
        /// What the timerfd is armed for (nil: disarmed).
        var armed: Duration?
        var wakeups: UInt64 = 0

        mutating func newID() -> UInt64 {
            nextID += 1
            return nextID
        }
    }

    private let descriptor: Int32
    private let state = Locked(State())

    /// A timer thread of its own (it lives as long as the process): tests use one to count its wakeups alone.
    package init() {
        let descriptor = clinux_timerfd_create_boottime()
        // Fails only without kernel support (Linux < 2.6.25) or out of descriptors at start-up.
        precondition(descriptor >= 0, "timerfd_create(CLOCK_BOOTTIME) failed: errno \(errno)")
        self.descriptor = descriptor
        let context = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(&thread, nil, { context in
            // A thread inherits its creator's name (often a libdispatch worker's): give it its own for top/ps.
            clinux_set_thread_name("timerfd")
            Unmanaged<TimerThread>.fromOpaque(context!).takeUnretainedValue().loop()
            return nil
        }, context)
        precondition(created == 0, "pthread_create for the timer thread failed: \(created)")
        pthread_detach(thread)
    }

    /// `CLOCK_BOOTTIME` now: time since boot, suspend included (what `ContinuousClock` reads on Linux).
    package static func now() -> Duration {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
    }

    /// How many times the thread has woken: one per distinct deadline reached (those due together share one).
    package var wakeups: UInt64 { state.withLock { $0.wakeups } }

    /// What the timerfd is armed for (nil: disarmed) and how many entries wait: for tests.
    package var armed: (deadline: Duration?, pending: Int) {
        state.withLock { ($0.armed, $0.actions.count) }
    }

    /// Calls `action` on the timer thread at `deadline` (keep it short: hand work to a queue); returns the id
    /// ``cancel(_:)`` takes.
    package func schedule(at deadline: Duration, _ action: @escaping @Sendable () -> Void) -> UInt64 {
        state.withLock { state in
            let id = state.newID()
            state.actions[id] = .call(action)
            state.heap.insert(Entry(deadline: deadline, id: id))
            rearm(&state)
            return id
        }
    }

    /// Forgets a scheduled action (and re-arms for the next one, so its deadline wakes nobody); false when it
    /// already ran or was cancelled.
    @discardableResult
    package func cancel(_ id: UInt64) -> Bool {
        state.withLock { state in
            guard state.actions.removeValue(forKey: id) != nil else { return false }
            rearm(&state)
            return true
        }
    }

    /// Returns at `deadline`; throws `CancellationError` at once when the task is cancelled.
    package func sleep(until deadline: Duration) async throws {
        let id = state.withLock { $0.newID() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // A cancellation that came before this registration found nothing to remove: check under the
                // lock so it is not lost.
                let cancelled = state.withLock { state -> Bool in
                    if Task.isCancelled { return true }
                    state.actions[id] = .resume(continuation)
                    state.heap.insert(Entry(deadline: deadline, id: id))
                    rearm(&state)
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let action = state.withLock { state in
                let action = state.actions.removeValue(forKey: id)
                rearm(&state)
                return action
            }
            if case .resume(let continuation)? = action { continuation.resume(throwing: CancellationError()) }
        }
    }

    /// Arms the timerfd for the earliest live entry, or disarms it; a syscall only when that changes. Under the
    /// lock.
    private func rearm(_ state: inout State) {
        while let first = state.heap.min, state.actions[first.id] == nil { state.heap.popMin() }
        let earliest = state.heap.min?.deadline
        guard earliest != state.armed else { return }
        state.armed = earliest
        let (seconds, attoseconds) = earliest?.components ?? (0, 0)
        // An all-zero time would disarm it instead of firing at once.
        let nanoseconds = earliest != nil && seconds <= 0 && attoseconds <= 0 ? 1 : attoseconds / 1_000_000_000
        _ = clinux_timerfd_set_absolute(descriptor, max(seconds, 0), Int(nanoseconds))
    }

    private func loop() {
        var expirations: UInt64 = 0
        while true {
            // Blocks until the armed deadline; timerfd_settime from other threads re-arms it meanwhile.
            let count = read(descriptor, &expirations, MemoryLayout<UInt64>.size)
            if count < 0, errno != EINTR, errno != EAGAIN {
                // ECANCELED cannot happen (no TFD_TIMER_CANCEL_ON_SET); anything else is a broken descriptor,
                // which would leave every sleeper waiting forever.
                preconditionFailure("read(timerfd) failed: errno \(errno)")
            }
            let now = Self.now()
            let due = state.withLock { state -> [Action] in
                state.wakeups += 1
                var due: [Action] = []
                while let first = state.heap.min, first.deadline <= now {
                    state.heap.popMin()
                    if let action = state.actions.removeValue(forKey: first.id) { due.append(action) }
                }
                // Fired: the timerfd is disarmed now.
                state.armed = nil
                rearm(&state)
                return due
            }
            for action in due {
                switch action {
                case .resume(let continuation): continuation.resume()
                case .call(let body): body()
                }
            }
        }
    }
}
