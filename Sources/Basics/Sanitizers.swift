#if canImport(Glibc)
    import Glibc
#endif

/// Whether this process runs under a sanitizer: its runtime is linked in (Swift has no compile-time condition for
/// sanitizers). Under one the code runs 2–5× slower, and a whole suite in parallel on two cores more so.
package enum Sanitizers {
    package static let thread: Bool = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__tsan_init") != nil
    package static let address: Bool = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__asan_init") != nil

    /// How much longer a wall-clock bound that only proves "bounded, not hung" must be: 3 under a sanitizer, else 1.
    package static let slowdown: Int64 = thread || address ? 3 : 1

    /// How many rounds a CPU-bound test runs in this build: all of `count`, and a tenth under ThreadSanitizer.
    ///
    /// Swift Testing starts every test at once, and a test that computes without suspending holds one of the
    /// concurrency pool's two threads (on two cores) until it is done. Under ThreadSanitizer the heaviest ten took
    /// 105 s of CPU between them, so every other test's continuations queued behind them: the first test of CI's
    /// ThreadSanitizer run finished 70 s in, and a 60-s give-up ran out. Races are what that run looks for, and
    /// they do not need 10,000 rounds of a single-threaded loop; the plain suite and AddressSanitizer's run keep
    /// the full count, and CI's fuzz stage raises it.
    package static func rounds(_ count: Int) -> Int {
        thread ? max(1, count / 10) : count
    }
}
