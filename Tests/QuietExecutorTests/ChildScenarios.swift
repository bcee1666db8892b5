// The fence (see Sources/QuietExecutor/QuietExecutors.swift): the scenarios need the executors.
#if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS

    @_spi(ExperimentalCustomExecutors) import _Concurrency
    import Basics
    import Dispatch
    import Testing

    @testable import QuietExecutor

    #if canImport(Glibc)
        import Glibc
    #endif

    // What needs a process of its own: the real main thread, or the executors installed for the whole process.
    // This test binary runs itself again with QUIET_EXECUTOR_TEST_CHILD naming a scenario; the scenario runs from
    // an ELF constructor, before `main` (as the daemon installs its executors), and ends the process with its
    // status, so the child never reaches the test runner. Without the variable the constructor does nothing.
    @used @section(".init_array")
    let runQuietExecutorChildScenario: @convention(c) () -> Void = {
        guard let name = getenv(childScenarioVariable) else { return }
        let status: Int32
        switch String(cString: name) {
        case "dispatch-main": status = dispatchMainScenario()
        case "generic-executor": status = genericExecutorScenario()
        case "sleep-benchmark": sleepBenchmarkScenario()
        default: status = 2
        }
        fflush(nil)  // _exit does not flush what the scenario printed
        _exit(status)
    }

    let childScenarioVariable = "QUIET_EXECUTOR_TEST_CHILD"

    /// Runs this test binary as a child with `scenario` (and `environment`), waits for it within `timeout`
    /// (killing it then), and returns its exit status. Its output goes to this process's.
    func runChildScenario(
        _ scenario: String, environment: [String: String] = [:], timeout: Duration = .seconds(60)
    ) async throws -> Int32 {
        var variables = [childScenarioVariable: scenario].merging(environment) { $1 }
        var pointer = environ
        while let entry = pointer.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "="), variables[String(text[..<equals])] == nil {
                variables[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            pointer += 1
        }
        let envp: [UnsafeMutablePointer<CChar>?] = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("quiet-executor-child"), nil]
        defer { for entry in envp + argv { free(entry) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/proc/self/exe", nil, nil, argv, envp)
        try #require(spawned == 0, "posix_spawn failed: \(spawned)")
        let exit = Locked<Int32?>(nil)
        let child = pid
        #expect(
            startDetachedThread {
                var status: Int32 = 0
                while waitpid(child, &status, 0) < 0, errno == EINTR {}
                exit.withLock { $0 = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f) }
            })
        do {
            try await waitUntil("the child \(scenario) exits", timeout: timeout) { exit.withLock { $0 != nil } }
        } catch {
            kill(pid, SIGKILL)
            throw error
        }
        return exit.withLock { $0 } ?? -1
    }

    /// A `DispatchQueue.main.async` block and a main-executor job both run on the main thread while the quiet
    /// main executor runs it; 0 when they did, 1 when one ran elsewhere.
    private func dispatchMainScenario() -> Int32 {
        let executor = QuietMainExecutor()
        let mainThread = pthread_self()
        let ran = Locked((block: false, job: false, elsewhere: false))
        @Sendable func note(_ update: (inout (block: Bool, job: Bool, elsewhere: Bool)) -> Void) {
            let done = ran.withLock { state in
                update(&state)
                if pthread_equal(pthread_self(), mainThread) == 0 { state.elsewhere = true }
                return state.block && state.job
            }
            if done { executor.stop() }
        }
        DispatchQueue.main.async { note { $0.block = true } }
        let actor = ScenarioActor(executor)
        Task.detached { await actor.run { note { $0.job = true } } }
        try? executor.run()
        return ran.withLock { $0.elsewhere } ? 1 : 0
    }

    private actor ScenarioActor {
        let executor: QuietMainExecutor
        init(_ executor: QuietMainExecutor) { self.executor = executor }
        nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
        func run(_ body: @Sendable () -> Void) { body() }
    }

#endif
