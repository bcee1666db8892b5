// The fence (see Sources/QuietExecutor/QuietExecutors.swift): the guess exists only with the SPI.
#if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS

    @_spi(ExperimentalCustomExecutors) import _Concurrency
    import Basics
    import Testing

    @testable import QuietExecutor

    #if canImport(Glibc)
        import Glibc
    #endif

    @Suite struct GenericExecutorTests {
        /// Catches: the one guessed runtime layout of the module (Sources/QuietExecutor/GenericExecutor.swift)
        /// gone wrong in a later runtime, by what the guess is for. On the runtime's generic executor a new task
        /// enters an idle actor on its own thread: one job a task. On any other executor reference the runtime
        /// forbids that switch and enqueues the actor's work as a second job (or traps on a reference it cannot
        /// use). In a child with the executors installed, since only tasks without a preference reach the pool
        /// as the default executor.
        @Test func tasksEnterAnIdleActorWithoutASecondJob() async throws {
            let status = try await runChildScenario(
                "generic-executor", environment: ["KEEPALIVE_EXECUTOR_THREADS": "2"])
            #expect(status == 0, "the child exited \(status) (1: two jobs a task, so not the generic executor)")
        }
    }

    /// An actor that counts calls, for the child.
    private actor Counter {
        private(set) var count = 0
        func increment() -> Int {
            count += 1
            return count
        }
    }

    /// The child's side: installs the executors, runs 1,000 tasks one after the other that each call an idle
    /// actor once, and counts the pool's jobs. 0 when they took fewer than 1.5 jobs a task, 1 otherwise.
    func genericExecutorScenario() -> Int32 {
        guard QuietExecutors.install() else {
            print("generic-executor: the executors were not installed: \(QuietExecutors.status)")
            return 3
        }
        let pool = QuietExecutors.Factory.global
        let counter = Counter()
        let done = Locked(0)
        let tasks = 1_000
        let before = pool.jobsRun
        // One after the other, each started by the one before: tasks that met in the actor would queue there.
        @Sendable func start(_ remaining: Int) {
            Task.detached {
                _ = await counter.increment()
                done.withLock { $0 += 1 }
                if remaining > 1 { start(remaining - 1) }
            }
        }
        start(tasks)
        let deadline = ContinuousClock.now + .seconds(30)
        while done.withLock({ $0 }) < tasks {
            guard ContinuousClock.now < deadline else { return 4 }
            usleep(1_000)
        }
        let perTask = Double(pool.jobsRun - before) / Double(tasks)
        print("generic-executor: \(perTask) jobs a task")
        return perTask < 1.5 ? 0 : 1
    }

#endif
