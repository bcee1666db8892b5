// The fence (see Sources/QuietExecutor/QuietExecutors.swift): the benchmark installs the executors.
#if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS

    @_spi(ExperimentalCustomExecutors) import _Concurrency
    import Testing

    @testable import QuietExecutor

    #if canImport(Glibc)
        import Glibc
    #endif

    /// The numbers in docs/EXECUTORS.md ("Measured"), on demand:
    /// `KEEPALIVE_EXECUTOR_BENCHMARK=1 swift test -c release --filter SleepBenchmark`. A child of this test binary
    /// installs the quiet executors for the whole process (or, the second time, keeps the stock ones) and times
    /// `Task.sleep` there: 10,000 sleeps of 1 ms one after the other, 40 of 50 ms, and 100 tasks sleeping 1–5 ms
    /// at once, 100 times each.
    @Suite struct SleepBenchmark {
        @Test(.enabled(if: getenv("KEEPALIVE_EXECUTOR_BENCHMARK") != nil))
        func sleepRoundTrips() async throws {
            for stock in [false, true] {
                let environment = stock ? ["KEEPALIVE_EXECUTOR": "dispatch"] : [:]
                let status = try await runChildScenario(
                    "sleep-benchmark", environment: environment, timeout: .seconds(300))
                #expect(status == 0)
            }
        }
    }

    /// The child's side: installs the executors (unless KEEPALIVE_EXECUTOR=dispatch), measures, prints, exits.
    func sleepBenchmarkScenario() -> Never {
        let installed = QuietExecutors.install()
        Task.detached {
            print("executors: \(QuietExecutors.status)")
            do {
                try await measureSleeps()
                exit(0)
            } catch {
                print("benchmark failed: \(error)")
                exit(1)
            }
        }
        if installed { try? QuietExecutors.Factory.main.run() }
        // (Not dispatch_main(): it ends the calling thread, which inside a constructor unwinds through the loader.)
        while true { pause() }
    }

    private func measureSleeps() async throws {
        let clock = ContinuousClock()
        var late: [Int64] = []
        var (cpu, switches) = usage()
        for _ in 0..<10_000 {
            let start = clock.now
            try await Task.sleep(for: .milliseconds(1))
            late.append(nanoseconds(start.duration(to: clock.now)) - 1_000_000)
        }
        var (cpuAfter, switchesAfter) = usage()
        print(
            "10,000 sleeps of 1 ms: late by \(summary(late)); CPU \(micro((cpuAfter - cpu) / 10_000)) µs and "
                + "\(Double((switchesAfter - switches) * 100 / 10_000) / 100) context switches a sleep")

        late = []
        for _ in 0..<40 {
            let start = clock.now
            try await Task.sleep(for: .milliseconds(50))
            late.append(nanoseconds(start.duration(to: clock.now)) - 50_000_000)
        }
        print("40 sleeps of 50 ms: late by \(summary(late))")

        (cpu, switches) = usage()
        late = try await withThrowingTaskGroup(of: [Int64].self) { group in
            for task in 0..<100 {
                group.addTask {
                    var late: [Int64] = []
                    var random = UInt64(task + 1) &* 0x9E37_79B9_7F4A_7C15
                    for _ in 0..<100 {
                        random ^= random << 13
                        random ^= random >> 7
                        random ^= random << 17
                        let delay = Int64(1_000_000 + random % 4_000_000)
                        let start = clock.now
                        try await Task.sleep(for: .nanoseconds(delay))
                        late.append(nanoseconds(start.duration(to: clock.now)) - delay)
                    }
                    return late
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        (cpuAfter, switchesAfter) = usage()
        let perSleep = micro((cpuAfter - cpu) / 10_000)
        print("100 tasks × 100 sleeps of 1–5 ms: late by \(summary(late)); CPU \(perSleep) µs a sleep")
    }

    private func usage() -> (cpu: Int64, switches: Int) {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let cpu =
            (Int64(usage.ru_utime.tv_sec) + Int64(usage.ru_stime.tv_sec)) * 1_000_000_000
            + (Int64(usage.ru_utime.tv_usec) + Int64(usage.ru_stime.tv_usec)) * 1_000
        return (cpu, usage.ru_nvcsw + usage.ru_nivcsw)
    }

    private func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    private func micro(_ nanoseconds: Int64) -> String { "\(Double(nanoseconds / 100) / 10)" }

    private func summary(_ values: [Int64]) -> String {
        let sorted = values.sorted()
        func at(_ share: Double) -> Int64 { sorted[min(sorted.count - 1, Int(Double(sorted.count) * share))] }
        return "p50 \(micro(at(0.5))) µs, p99 \(micro(at(0.99))) µs"
    }

#endif
