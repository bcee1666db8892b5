// The fence (see Sources/QuietExecutor/QuietExecutors.swift): these helpers drive the executors themselves.
#if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS

    @_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency
    import Basics
    import Synchronization
    import Testing

    @testable import QuietExecutor

    #if canImport(Glibc)
        import Glibc
    #endif

    /// A condition did not hold, or a task did not end, within its deadline.
    struct TimedOut: Error, CustomStringConvertible {
        var what: String
        var description: String { "timed out waiting until \(what)" }
    }

    /// Looks at `condition` every millisecond until it holds; throws `TimedOut` after `timeout` (a give-up for a
    /// broken executor, not a timing assertion: generous for a loaded two-core machine under a sanitizer).
    func waitUntil(_ what: String, timeout: Duration = .seconds(20), _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout * Sanitizers.slowdown
        while !condition() {
            guard ContinuousClock.now < deadline else { throw TimedOut(what: what) }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// `task`'s value, or `TimedOut` when it has not ended after `timeout` (then it is cancelled). Whichever comes
    /// first resumes the wait; a task that never ends does not hold the test.
    func value<T: Sendable>(
        of task: Task<T, Never>, _ what: String, timeout: Duration = .seconds(20)
    ) async throws -> T {
        let result: T? = await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
            let pending = Locked<CheckedContinuation<T?, Never>?>(continuation)
            let finish: @Sendable (T?) -> Void = { value in
                pending.withLock { waiting in
                    defer { waiting = nil }
                    return waiting
                }?.resume(returning: value)
            }
            Task { finish(await task.value) }
            Task {
                try? await Task.sleep(for: timeout)
                finish(nil)
            }
        }
        guard let result else {
            task.cancel()
            throw TimedOut(what: what)
        }
        return result
    }

    /// The kernel's name of the calling thread (`ka-worker-1`, …).
    func currentThreadName() -> String {
        let fd = open("/proc/thread-self/comm", O_RDONLY)
        guard fd >= 0 else { return "?" }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = read(fd, &buffer, buffer.count)
        return count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self).trimmingNewline : "?"
    }

    extension String {
        fileprivate var trimmingNewline: String { hasSuffix("\n") ? String(dropLast()) : self }
    }

    /// A task executor that only keeps the jobs it is given: a test takes a task's first job from it and hands
    /// it to the executor under test however it likes (now, after a delay, at a deadline, on some clock).
    final class JobCatcher: TaskExecutor, @unchecked Sendable {
        // @unchecked Sendable: `jobs` is a lock.
        private let jobs = Locked([UnownedJob]())

        func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            jobs.withLock { $0.append(job) }
        }

        /// The first job enqueued, once there is one.
        func take() async throws -> UnownedJob {
            var taken: UnownedJob?
            try await waitUntil("the task's first job is enqueued") {
                taken = jobs.withLock { $0.isEmpty ? nil : $0.removeFirst() }
                return taken != nil
            }
            guard let taken else { throw TimedOut(what: "the task's first job is enqueued") }
            return taken
        }
    }

    /// Where and when a job ran.
    struct Ran: Sendable {
        var at: ContinuousClock.Instant
        var thread: String
    }

    /// Starts a task whose body only notes when and where it runs, gives its first job to `start` (which
    /// schedules it on the executor under test and returns whatever it measured then), and waits for the body.
    func runFirstJob<T>(
        _ what: String, timeout: Duration = .seconds(20), start: (UnownedJob) -> T
    ) async throws -> (started: T, ran: Ran) {
        let catcher = JobCatcher()
        let task = Task(executorPreference: catcher) { Ran(at: ContinuousClock.now, thread: currentThreadName()) }
        let job = try await catcher.take()
        let started = start(job)
        return (started, try await value(of: task, what, timeout: timeout))
    }

    /// Holds the threads that wait on it, blocked (not spinning), until it is opened; then lets every wait through.
    final class BlockingGate: Sendable {
        private let mutex = PthreadMutex()
        private let condition = PthreadCondition()
        private let opened = Atomic<Bool>(false)

        deinit {
            condition.destroy()
            mutex.destroy()
        }

        func wait() {
            mutex.lock()
            while !opened.load(ordering: .acquiring) { condition.wait(mutex) }
            mutex.unlock()
        }

        func open() {
            mutex.lock()
            opened.store(true, ordering: .releasing)
            condition.broadcast()
            mutex.unlock()
        }
    }

    /// A flag for spinning jobs to watch without a lock.
    final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        var isSet: Bool { value.load(ordering: .acquiring) }
        func set() { value.store(true, ordering: .releasing) }
    }

#endif
