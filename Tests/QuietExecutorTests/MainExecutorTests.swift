// The fence (see Sources/QuietExecutor/QuietExecutors.swift): without the SPI there is no main executor to test.
#if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS

    @_spi(ExperimentalCustomExecutors) import _Concurrency
    import Basics
    import Testing

    @testable import QuietExecutor

    #if canImport(Glibc)
        import Glibc
    #endif

    /// An actor whose jobs run on a given main executor instance (as the main actor's run on the installed one).
    private actor OnExecutor {
        let executor: QuietMainExecutor
        init(_ executor: QuietMainExecutor) { self.executor = executor }
        nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

        /// The thread this runs on, and whether the executor says that it isolates it.
        func whereAmI() -> (thread: pthread_t, isolated: Bool?) {
            (pthread_self(), executor.isIsolatingCurrentContext())
        }
    }

    @Suite struct MainExecutorTests {
        /// Catches: main-executor jobs that run elsewhere than on the thread in `run()`, a wrong answer to the
        /// runtime's isolation question, and a `stop()` that does not end `run()`. (This process's real main thread
        /// belongs to the stock executors: an instance runs on a thread of the test's own; the libdispatch main
        /// queue is left to them.)
        @Test func jobsRunOnTheThreadInRunUntilStopped() async throws {
            let executor = QuietMainExecutor(drainDispatchMainQueue: false)
            #expect(executor.unusableReason == nil)
            let runner = Locked<(thread: pthread_t?, returned: Bool)>((nil, false))
            #expect(
                startDetachedThread {
                    runner.withLock { $0.thread = pthread_self() }
                    try? executor.run()
                    runner.withLock { $0.returned = true }
                })
            try await waitUntil("the executor's thread starts") { runner.withLock { $0.thread != nil } }
            let actor = OnExecutor(executor)
            for _ in 0..<3 {
                let (thread, isolated) = await actor.whereAmI()
                #expect(runner.withLock { $0.thread.map { pthread_equal($0, thread) != 0 } } == true)
                #expect(isolated == true)
            }
            #expect(executor.isIsolatingCurrentContext() == false)
            executor.stop()
            try await waitUntil("run() returns after stop()") { runner.withLock { $0.returned } }
        }

        /// Catches: `DispatchQueue.main` left undrained while the quiet main executor holds the main thread
        /// (Sources/QuietExecutor/DispatchMainQueue.swift), and jobs and main-queue blocks that starve each other.
        /// On the real main thread, so in a child of this test binary: a stock process has given its main thread
        /// to `dispatch_main()`. The child runs before `main` (ChildScenarios.swift) and exits 0 when a block and a
        /// job both ran on its main thread.
        @Test func dispatchMainQueueBlocksRun() async throws {
            let status = try await runChildScenario("dispatch-main")
            #expect(status == 0, "the child exited \(status) (1: the block ran off the main thread)")
        }
    }

#endif
