import QuietExecutor

// Installs the daemon's executors (Sources/QuietExecutor) before `main`: Swift 6.3 creates its stock executors
// when the async `main` that swift-argument-parser gives `KeepAliveCommand` starts, and `_createExecutors` must
// come first. An ELF constructor (`.init_array`) runs before `main`, with no other thread yet.
// `KEEPALIVE_EXECUTOR=dispatch` keeps libdispatch's executors (to compare, or if these ever misbehave). The
// malloc arena limit is set here too, for the same reason: before any thread has allocated.
@used @section(".init_array")
let installQuietExecutors: @convention(c) () -> Void = {
    limitMallocArenas()
    QuietExecutors.install()
}
