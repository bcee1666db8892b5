import CLinux
#if canImport(Glibc)
    import Glibc
#endif
import Synchronization

/// One thread blocked in `read(2)` on one `timerfd` (`CLOCK_BOOTTIME`, absolute), armed for the earliest
/// pending deadline: every deadline reached costs exactly one wakeup, and a cancelled one costs none.
///
/// Or the same without a thread of its own (``hosted()``): a thread that already waits in `epoll` (a D-Bus
/// connection's) watches the timerfd, calls ``fire()`` when it is readable, and makes the set its thread's
/// (``setCurrentHost(_:)``). Timers armed on that thread then fire on it: the tick of a daemon whose work runs
/// there wakes one thread, not the timer thread and then, through it, the connection's (a hand-over that cost a
/// measurable share of a poll's CPU at one device, Benchmarks/NOTES.md). When the host ends, ``handOver()`` moves what
/// is
/// pending to ``shared``, keeping each entry's id, and everything asked of the set after that goes there too.
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
        /// What the timerfd is armed for (nil: disarmed).
        var armed: Duration?
        var wakeups: UInt64 = 0
        /// A hosted set whose host has ended: its entries, and everything asked of it since, are on ``shared``.
        var forwarded = false
    }

    /// Ids are unique across every set of the process: an entry keeps its id when a hosted set hands it over.
    private static let ids = Atomic<UInt64>(0)

    private static func newID() -> UInt64 {
        ids.add(1, ordering: .relaxed).newValue
    }

    /// The timerfd (non-blocking when hosted).
    package let descriptor: Int32
    private let state = Locked(State())

    /// A timer thread of its own (it lives as long as the process): tests use one to count its wakeups alone.
    package init() {
        let descriptor = clinux_timerfd_create_boottime()
        // Fails only without kernel support (Linux < 2.6.25) or out of descriptors at start-up.
        precondition(descriptor >= 0, "timerfd_create(CLOCK_BOOTTIME) failed: errno \(errno)")
        self.descriptor = descriptor
        // Made at the first deadline of the process, before any other thread could have used them all up.
        let started = PlatformThread.start(name: "timerfd") { [self] in loop() }
        if case .failure(let error) = started { preconditionFailure("cannot start the timer thread: \(error)") }
    }

    private init(hostedDescriptor: Int32) {
        descriptor = hostedDescriptor
    }

    /// A set without a thread, for a host that waits in `epoll` on ``descriptor`` (level-triggered, readable)
    /// and calls ``fire()``; nil when the process is out of descriptors.
    package static func hosted() -> TimerThread? {
        let descriptor = clinux_timerfd_create_boottime_nonblocking()
        guard descriptor >= 0 else { return nil }
        return TimerThread(hostedDescriptor: descriptor)
    }

    deinit {
        // Only a hosted set ends (a thread of its own holds its set for the life of the process); one handed
        // over has closed its descriptor already.
        if !state.withLock(\.forwarded) { close(descriptor) }
    }

    /// Identifies the hosted set of the thread this runs on.
    private static let hostKey: pthread_key_t = {
        var key = pthread_key_t()
        let created = pthread_key_create(&key, nil)
        precondition(created == 0, "pthread_key_create failed: \(created)")
        return key
    }()

    /// The hosted set of the calling thread, if it hosts one (``setCurrentHost(_:)``).
    package static var currentHost: TimerThread? {
        pthread_getspecific(hostKey).map { Unmanaged<TimerThread>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Makes `timers` the calling thread's hosted set (nil: none), returning the one it replaces. The host
    /// keeps `timers` alive for as long as it is set.
    @discardableResult
    package static func setCurrentHost(_ timers: TimerThread?) -> TimerThread? {
        let previous = currentHost
        pthread_setspecific(hostKey, timers.map { Unmanaged.passUnretained($0).toOpaque() })
        return previous
    }

    /// `CLOCK_BOOTTIME` now: time since boot, suspend included (what `ContinuousClock` reads on Linux).
    package static func now() -> Duration {
        .nanoseconds(clockNanoseconds(CLOCK_BOOTTIME))
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
        locked { owner, state in
            let id = Self.newID()
            state.actions[id] = .call(action)
            state.heap.insert(Entry(deadline: deadline, id: id))
            owner.rearm(&state)
            return id
        }
    }

    /// Forgets a scheduled action (and re-arms for the next one, so its deadline wakes nobody); false when it
    /// already ran or was cancelled.
    @discardableResult
    package func cancel(_ id: UInt64) -> Bool {
        take(id) != nil
    }

    /// Returns at `deadline`; throws `CancellationError` at once when the task is cancelled.
    package func sleep(until deadline: Duration) async throws {
        let id = Self.newID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // A cancellation that came before this registration found nothing to remove: check under the
                // lock so it is not lost.
                let cancelled = locked { owner, state -> Bool in
                    if Task.isCancelled { return true }
                    state.actions[id] = .resume(continuation)
                    state.heap.insert(Entry(deadline: deadline, id: id))
                    owner.rearm(&state)
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            if case .resume(let continuation)? = take(id) { continuation.resume(throwing: CancellationError()) }
        }
    }

    /// Removes the entry `id` (re-arming for the next one) and returns its action; nil when it already ran or was
    /// cancelled.
    private func take(_ id: UInt64) -> Action? {
        locked { owner, state in
            let action = state.actions.removeValue(forKey: id)
            if action != nil { owner.rearm(&state) }
            return action
        }
    }

    /// Runs `body` under the lock of the set that holds the entries: this one, or ``shared`` once this one has
    /// been handed over (locked while this one's lock is held, so nothing asked during a hand-over is lost; no
    /// one takes the locks in the other order).
    private func locked<T>(_ body: (TimerThread, inout State) -> T) -> T {
        state.withLock { state in
            guard state.forwarded else { return body(self, &state) }
            return TimerThread.shared.state.withLock { body(TimerThread.shared, &$0) }
        }
    }

    /// The host has ended: moves every pending entry, with its id and deadline, to ``shared`` and closes the
    /// timerfd (the host must not watch ``descriptor`` after this); whatever is asked of this set later is done
    /// on ``shared``. Once.
    package func handOver() {
        state.withLock { state in
            guard !state.forwarded else { return }
            state.forwarded = true
            let entries = state.heap.storage.compactMap { entry in state.actions[entry.id].map { (entry, $0) } }
            state.heap = Heap()
            state.actions = [:]
            state.armed = nil
            // Closed now, not when the last reference goes: a closed connection may be referenced for long.
            close(descriptor)
            guard !entries.isEmpty else { return }
            TimerThread.shared.state.withLock { shared in
                for (entry, action) in entries {
                    shared.actions[entry.id] = action
                    shared.heap.insert(entry)
                }
                TimerThread.shared.rearm(&shared)
            }
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

    /// On the host's thread, when ``descriptor`` is readable: runs the actions that are due.
    package func fire() {
        var expirations: UInt64 = 0
        // Non-blocking: a re-arm from another thread since epoll reported it makes this EAGAIN, harmlessly.
        _ = read(descriptor, &expirations, MemoryLayout<UInt64>.size)
        runDue()
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
            runDue()
        }
    }

    /// Takes the entries due now (re-arming for the next) and runs them, outside the lock.
    private func runDue() {
        let now = Self.now()
        let due = state.withLock { state -> [Action] in
            // A set handed over keeps nothing (a late readiness of its descriptor is not a wakeup).
            guard !state.forwarded else { return [] }
            state.wakeups += 1
            var due: [Action] = []
            while let first = state.heap.min, first.deadline <= now {
                state.heap.popMin()
                if let action = state.actions.removeValue(forKey: first.id) { due.append(action) }
            }
            // Fired: the timerfd is disarmed now (or, hosted, about to be re-armed for the next).
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
