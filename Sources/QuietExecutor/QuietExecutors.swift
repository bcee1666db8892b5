// The executors of Swift concurrency for a daemon that must not wake between its ticks.
//
// On Linux the stock executors are libdispatch's: the first use of its global queues starts its internal
// workqueue, whose monitor is a 1-s timer for the life of the process (`_dispatch_workq_monitor_pools`), and idle
// worker threads wake after 5 s to exit. A gateway daemon that sleeps 30 s between polls wakes 30 times for
// nothing. These executors replace both: a pool of threads that wait without a timeout, one timer thread for
// `Task.sleep` that waits only until the earliest deadline, and the main executor on the real main thread.
//
// Installed through Swift 6.3's `ExecutorFactory` (SPI `ExperimentalCustomExecutors`) with
// `_createExecutors(factory:)`, which must run before the runtime makes its own executors, that is before
// `main`: from an ELF constructor in the executable (`Sources/KeepAliveCLI/QuietExecutorInstallation.swift`).
// (The compiler does not act on `typealias DefaultExecutorFactory` in 6.3.1; a constructor is the way that works
// with any `@main`, swift-argument-parser's included.) See docs/EXECUTORS.md.
@_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Installs this module's executors as the process's main and default executors.
public enum QuietExecutors {
    struct Factory: ExecutorFactory {
        static let global = QuietGlobalExecutor(
            threads: environmentInteger("KEEPALIVE_EXECUTOR_THREADS"),
            maxThreads: environmentInteger("KEEPALIVE_EXECUTOR_MAX_THREADS") ?? 64)
        static let main = QuietMainExecutor()
        static var mainExecutor: any MainExecutor { main }
        static var defaultExecutor: any TaskExecutor { global }
    }

    // nonisolated(unsafe): written once, by the ELF constructor, before any other thread exists.
    nonisolated(unsafe) private static var installed = false

    /// Makes these the process's executors, unless `KEEPALIVE_EXECUTOR=dispatch` asks for the stock ones.
    ///
    /// Must run before the Swift runtime creates its own executors: before any task, any use of the main actor,
    /// before an async `main` starts (an ELF constructor is the place). Later it would leave some jobs on the
    /// stock executors. Returns whether they were installed.
    @discardableResult
    public static func install() -> Bool {
        if installed { return true }
        if let choice = getenv("KEEPALIVE_EXECUTOR"), String(cString: choice) == "dispatch" { return false }
        installed = true
        _createExecutors(factory: Factory.self)
        return true
    }

    /// Whether ``install()`` installed them in this process.
    public static var isInstalled: Bool { installed }

    /// The global pool's figures now: threads, idle threads, jobs queued, sleeps pending, threads added because
    /// the others were blocked.
    public static var statistics: (threads: Int, idle: Int, queued: Int, timers: Int, added: Int)? {
        guard installed else { return nil }
        let stats = Factory.global.stats()
        return (stats.threads, stats.idle, stats.queued, stats.timers, stats.starvationSpawns)
    }

    private static func environmentInteger(_ name: String) -> Int? {
        getenv(name).flatMap { Int(String(cString: $0)) }
    }
}
