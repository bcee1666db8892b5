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
}
