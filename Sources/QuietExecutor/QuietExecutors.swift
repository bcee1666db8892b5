// The executors of Swift concurrency for a daemon that must not wake between its ticks.
//
// On Linux the stock executors are libdispatch's: the first use of its global queues starts its internal
// workqueue, whose monitor is a 1-s timer for the life of the process (`_dispatch_workq_monitor_pools`), and idle
// worker threads wake after 5 s to exit. A gateway daemon that sleeps 30 s between polls wakes 30 times for
// nothing. These executors replace both: a pool of threads that wait without a timeout, whose delayed jobs
// (`Task.sleep`) are deadlines on the process's one timerfd thread (`Sources/Basics/TimerThread.swift`), and the
// main executor on the real main thread.
//
// Installed through Swift 6.3's `ExecutorFactory` (SPI `ExperimentalCustomExecutors`) with
// `_createExecutors(factory:)`, which must run before the runtime makes its own executors, that is before
// `main`: from an ELF constructor in the executable (`Sources/KeepAliveCLI/QuietExecutorInstallation.swift`).
// (The compiler does not act on `typealias DefaultExecutorFactory` in 6.3.1; a constructor is the way that works
// with any `@main`, swift-argument-parser's included.) See docs/EXECUTORS.md.
//
// The fence. The SPI is experimental: 6.2 named its scheduling protocol differently, older compilers lack it, and
// no feature flag (`hasFeature`) or module version (`canImport(_:_version:)`) names it, so the compiler's version is
// the test. Every file of this module that uses the SPI is inside
//
//     #if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS
//
// and compiles to nothing without it; what is left is this file's status API, which then says `stock` and why.
// `KEEPALIVE_STOCK_EXECUTORS` (`swift build -Xswiftc -DKEEPALIVE_STOCK_EXECUTORS`) forces the fence shut: the way
// to build with a later Swift whose SPI no longer matches, and what `.ci/stock-executors.sh` tests.

#if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS
    @_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The executors the process runs Swift concurrency on: this module's, when ``install()`` installed them, or the
/// stock ones (libdispatch's).
public enum QuietExecutors {
    /// Which executors run the process's tasks.
    public enum Status: Sendable, Equatable, CustomStringConvertible {
        /// This module's: nothing wakes between a daemon's ticks.
        case quiet
        /// The Swift runtime's own (libdispatch's global queues and main queue on Linux), and why.
        case stock(reason: String)

        /// `quiet`, or `stock (dispatch), reason: …` (what `keepalive --version` prints after `executors: `).
        public var description: String {
            switch self {
            case .quiet: "quiet"
            case .stock(let reason): "stock (dispatch), reason: \(reason)"
            }
        }
    }

    /// Why this build cannot install the executors at all; nil when it can.
    public static let unavailableReason: String? = {
        #if KEEPALIVE_STOCK_EXECUTORS
            return "built with KEEPALIVE_STOCK_EXECUTORS"
        #elseif !compiler(>=6.3)
            return "built by a Swift compiler older than 6.3, which lacks the ExecutorFactory SPI"
        #elseif !os(Linux)
            return "built for another system than Linux"
        #else
            return nil
        #endif
    }()

    // nonisolated(unsafe): written by `install()`, which runs in the ELF constructor before any other thread
    // exists (its contract); read after, by threads that the constructor's return happens before.
    nonisolated(unsafe) private static var current: Status = .stock(
        reason: unavailableReason ?? "QuietExecutors.install() has not run in this process")

    /// Which executors this process runs on: `quiet` once ``install()`` installed them; otherwise `stock`, with
    /// the reason (this build cannot have them, `KEEPALIVE_EXECUTOR=dispatch`, or `install()` did not run).
    public static var status: Status { current }

    /// Whether ``install()`` installed them in this process.
    public static var isInstalled: Bool { current == .quiet }

    /// Makes these the process's executors, unless this build cannot have them (``unavailableReason``) or
    /// `KEEPALIVE_EXECUTOR=dispatch` asks for the stock ones. ``status`` says which, and why.
    ///
    /// Must run before the Swift runtime creates its own executors: before any task, any use of the main actor,
    /// before an async `main` starts (an ELF constructor is the place). Later it would leave some jobs on the
    /// stock executors. Returns whether they were installed.
    @discardableResult
    public static func install() -> Bool {
        if current == .quiet { return true }
        if let reason = unavailableReason {
            current = .stock(reason: reason)
            return false
        }
        if let choice = getenv("KEEPALIVE_EXECUTOR"), String(cString: choice) == "dispatch" {
            current = .stock(reason: "KEEPALIVE_EXECUTOR=dispatch")
            return false
        }
        #if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS
            if let reason = Factory.main.unusableReason {
                current = .stock(reason: reason)
                return false
            }
            current = .quiet
            _createExecutors(factory: Factory.self)
            return true
        #else
            return false
        #endif
    }

    /// The global pool's figures now (nil on the stock executors): threads, idle threads, jobs queued, delayed
    /// jobs pending, threads added because the others were blocked.
    public static var statistics: (threads: Int, idle: Int, queued: Int, timers: Int, added: Int)? {
        #if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS
            guard isInstalled else { return nil }
            let stats = Factory.global.stats()
            return (stats.threads, stats.idle, stats.queued, stats.timers, stats.starvationSpawns)
        #else
            return nil
        #endif
    }
}

#if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS
    extension QuietExecutors {
        struct Factory: ExecutorFactory {
            static let global = QuietGlobalExecutor(
                threads: environmentInteger("KEEPALIVE_EXECUTOR_THREADS"),
                maxThreads: environmentInteger("KEEPALIVE_EXECUTOR_MAX_THREADS") ?? 64)
            static let main = QuietMainExecutor()
            static var mainExecutor: any MainExecutor { main }
            static var defaultExecutor: any TaskExecutor { global }
        }

        private static func environmentInteger(_ name: String) -> Int? {
            getenv(name).flatMap { Int(String(cString: $0)) }
        }
    }
#endif
