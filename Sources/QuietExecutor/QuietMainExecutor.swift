@_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency
import CLinux
import Dispatch  // linked for the main queue's run-loop functions (CLinux declares them); no queue is used
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// MARK: - the main executor

/// The main executor: jobs run on the thread that calls `run()` (the real main thread under an async main).
// @unchecked Sendable: every mutable field is read and written under `mu`; the descriptors are set once in init.
final class QuietMainExecutor: MainExecutor, @unchecked Sendable {
    private let mu = ExecutorMutex()
    private var queue = JobFIFO()
    private var stopped = false
    private var running = false
    private var sleeping = false  // main thread is (about to be) blocked in poll()
    private let wakeFD: Int32  // read end of a self-pipe used to wake the main thread
    private let wakeWriteFD: Int32
    private let drainDispatchMain: Bool
    // Thread that called run() (the real main thread under async main).
    private var ownerThread: pthread_t? = nil
    // With the ELF-constructor installation this executor is created on the main thread.
    private let creatorThread = pthread_self()

    /// - Parameter drainDispatchMainQueue: also service libdispatch's main queue
    ///   (`DispatchQueue.main.async`, main-queue DispatchSources) from the main thread, the way
    ///   CFRunLoop does. Costs nothing while idle (one extra fd in the same poll()).
    public init(drainDispatchMainQueue: Bool = true) {
        var p: [Int32] = [-1, -1]
        precondition(pipe(&p) == 0, "pipe failed")
        for fd in p {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        wakeFD = p[0]
        wakeWriteFD = p[1]
        drainDispatchMain = drainDispatchMainQueue
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let j = UnownedJob(job)
        changeAndWake { queue.push(j) }
    }

    /// Makes `change` under the lock, then wakes the main thread if it is (about to be) blocked in `poll`.
    private func changeAndWake(_ change: () -> Void) {
        mu.lock()
        change()
        let wake = sleeping
        sleeping = false
        mu.unlock()
        if wake {
            var one: UInt8 = 1
            _ = write(wakeWriteFD, &one, 1)
        }
    }

    public func run() throws {
        mu.lock()
        precondition(!running, "QuietMainExecutor.run() is not reentrant")
        running = true
        stopped = false
        ownerThread = pthread_self()
        mu.unlock()

        let dispatchFD: Int32 = drainDispatchMain ? _dispatch_get_main_queue_handle_4CF() : -1
        var fds = [
            pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0),
            pollfd(fd: dispatchFD, events: Int16(POLLIN), revents: 0),
        ]
        var sinceDispatchCheck = 0

        func serviceDispatch(timeout: Int32) {
            guard dispatchFD >= 0 else { return }
            var p = pollfd(fd: dispatchFD, events: Int16(POLLIN), revents: 0)
            if timeout < 0 || poll(&p, 1, timeout) > 0 {
                var v: UInt64 = 0
                _ = read(dispatchFD, &v, 8)
                _dispatch_main_queue_callback_4CF(nil)
            }
        }

        mu.lock()
        while !stopped {
            if let j = queue.pop() {
                mu.unlock()
                unsafe j.runSynchronously(on: self.asUnownedSerialExecutor())
                sinceDispatchCheck += 1
                if sinceDispatchCheck >= 64 {
                    sinceDispatchCheck = 0
                    serviceDispatch(timeout: 0)
                }
                mu.lock()
                continue
            }
            sleeping = true
            mu.unlock()
            // Block without a timeout until a job is enqueued (eventfd) or the dispatch main queue
            // has work.
            fds[0].revents = 0
            fds[1].revents = 0
            let n = poll(&fds, dispatchFD >= 0 ? 2 : 1, -1)
            if n > 0 {
                if fds[0].revents != 0 {
                    var buf = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
                    _ = withUnsafeMutableBytes(of: &buf) { read(wakeFD, $0.baseAddress, 32) }
                }
                if dispatchFD >= 0 && fds[1].revents != 0 { serviceDispatch(timeout: -1) }
            }
            mu.lock()
            sleeping = false
        }
        running = false
        mu.unlock()
    }

    public func stop() {
        changeAndWake { stopped = true }
    }

    public var isMainExecutor: Bool { true }

    public func checkIsolated() {
        mu.lock()
        let t = ownerThread
        mu.unlock()
        if let t, pthread_equal(t, pthread_self()) != 0 { return }
        if t == nil && pthread_equal(creatorThread, pthread_self()) != 0 { return }
        fatalError("Incorrect actor executor assumption; expected the main thread")
    }
}
