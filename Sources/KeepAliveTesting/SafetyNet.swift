import Basics

/// How much longer the doubles' real-time safety nets wait in a process instrumented by ThreadSanitizer or
/// AddressSanitizer (its runtime is linked in; Swift has no compile-time condition for sanitizers): the code runs
/// several times slower there, and a test suite in parallel on two cores more so. The nets only turn a hang into
/// a failure, so waiting longer costs nothing when all is well.
let safetyNetScale = Sanitizers.slowdown
