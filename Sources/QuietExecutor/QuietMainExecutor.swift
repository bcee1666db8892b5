// The fence (see QuietExecutors.swift): without the SPI this file is empty.
#if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS

    @_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency
    import Basics
    import CLinux

    #if canImport(Glibc)
        import Glibc
    #elseif canImport(Musl)
        import Musl
    #endif

    // MARK: - the main executor

    /// The main executor: jobs run on the thread that calls `run()` (the real main thread under an async main),
    /// which waits in `poll` without a timeout on a pipe of its own and on libdispatch's main queue.
    // @unchecked Sendable: every mutable field is read and written under `mu`; the descriptors are set once in init.
    final class QuietMainExecutor: MainExecutor, @unchecked Sendable {
        private let mu = PthreadMutex()
        private var queue = JobFIFO()
        private var stopped = false
        private var running = false
        private var sleeping = false  // the running thread is (about to be) blocked in poll()
        private let wakeFD: Int32  // read end of a self-pipe that wakes the running thread
        private let wakeWriteFD: Int32
        private let drainDispatchMain: Bool
        // Thread that called run() (the real main thread under async main).
        private var ownerThread: pthread_t? = nil
        // With the ELF-constructor installation this executor is created on the main thread.
        private let creatorThread = pthread_self()

        /// Why the executor cannot run: the wake-up pipe could not be made (out of descriptors); nil when it can.
        let unusableReason: String?

        /// - Parameter drainDispatchMainQueue: also run libdispatch's main queue (`DispatchQueue.main.async`,
        ///   main-queue DispatchSources) on the thread that calls `run()`, as CFRunLoop does. Costs nothing while
        ///   idle (one more descriptor in the same poll).
        init(drainDispatchMainQueue: Bool = true) {
            var p: [Int32] = [-1, -1]
            if clinux_pipe_cloexec(&p) == 0 {
                for fd in p { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
                unusableReason = nil
            } else {
                unusableReason = "the main executor's wake-up pipe could not be made (errno \(errno))"
            }
            wakeFD = p[0]
            wakeWriteFD = p[1]
            drainDispatchMain = drainDispatchMainQueue
        }

        deinit {
            for fd in [wakeFD, wakeWriteFD] where fd >= 0 { close(fd) }
            mu.destroy()
        }

        func enqueue(_ job: consuming ExecutorJob) {
            let j = UnownedJob(job)
            changeAndWake { queue.push(j) }
        }

        /// Makes `change` under the lock, then wakes the running thread if it is (about to be) blocked in `poll`.
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

        func run() throws {
            mu.lock()
            // Reentrance is a programming error, as it is for CFRunLoop and the stock executor.
            precondition(!running, "QuietMainExecutor.run() is not reentrant")
            running = true
            stopped = false
            ownerThread = pthread_self()
            mu.unlock()

            let dispatchFD: Int32 = drainDispatchMain ? DispatchMainQueue.descriptor() : -1
            var fds = [
                pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0),
                pollfd(fd: dispatchFD, events: Int16(POLLIN), revents: 0),
            ]
            var sinceDispatchCheck = 0

            // Drains the main queue when its descriptor is readable (after `timeout` ms; -1: known to be).
            func serviceDispatch(timeout: Int32) {
                guard dispatchFD >= 0 else { return }
                var p = pollfd(fd: dispatchFD, events: Int16(POLLIN), revents: 0)
                if timeout < 0 || poll(&p, 1, timeout) > 0 { DispatchMainQueue.drain(dispatchFD) }
            }

            mu.lock()
            while !stopped {
                if let j = queue.pop() {
                    mu.unlock()
                    unsafe j.runSynchronously(on: self.asUnownedSerialExecutor())
                    // A steady stream of jobs never lets the thread reach poll: look at the main queue now and then.
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
                // Blocks without a timeout until a job is enqueued (the pipe) or the main queue has work. Without a
                // pipe (`unusableReason`) it looks every 10 ms instead: slower and wakeful, but the jobs still run.
                fds[0].revents = 0
                fds[1].revents = 0
                // (poll skips a negative descriptor: a missing pipe or main queue.)
                let n = poll(&fds, 2, wakeFD >= 0 ? -1 : 10)
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

        func stop() {
            changeAndWake { stopped = true }
        }

        var isMainExecutor: Bool { true }

        /// Whether the calling thread is the one that runs (or, before `run()`, made) this executor.
        func isIsolatingCurrentContext() -> Bool? {
            mu.lock()
            let t = ownerThread
            mu.unlock()
            if let t { return pthread_equal(t, pthread_self()) != 0 }
            return pthread_equal(creatorThread, pthread_self()) != 0
        }

        func checkIsolated() {
            // The protocol's contract: a failed isolation check (`MainActor.assumeIsolated` off the main thread)
            // stops the program, as it does on the stock main executor.
            if isIsolatingCurrentContext() != true {
                preconditionFailure("Incorrect actor executor assumption; expected the main thread")
            }
        }
    }

#endif
