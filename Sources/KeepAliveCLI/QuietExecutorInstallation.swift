import KeepAliveDaemon
import QuietExecutor

// Installs the daemon's executors (Sources/QuietExecutor) before `main`: Swift 6.3 creates its stock executors
// when the async `main` that swift-argument-parser gives `KeepAliveCommand` starts, and `_createExecutors` must
// come first. An ELF constructor (`.init_array`) runs before `main`, with no other thread yet.
// `KEEPALIVE_EXECUTOR=dispatch` keeps libdispatch's executors (to compare, or if these ever misbehave); a build
// without the executor SPI (docs/EXECUTORS.md, "The fence") has only those. The malloc arena limit is set here
// too, for the same reason: before any thread has allocated. (`@used @section` came with Swift 6.3: an older
// compiler builds no constructor, and the stock executors with glibc's default arenas.)
#if compiler(>=6.3)
    @used @section(".init_array")
    let installQuietExecutors: @convention(c) () -> Void = {
        limitMallocArenas()
        QuietExecutors.install()
    }
#endif

/// What `keepalive --version` prints: the version, then which executors this build and this process run on
/// (`executors: quiet`, or `executors: stock (dispatch), reason: …`).
let versionWithExecutors = "\(KeepAliveVersion.current)\nexecutors: \(QuietExecutors.status)"

/// Which executors the process runs on, for the daemon's start-up log: `quiet`, or `stock (dispatch), reason: …`.
var executorsInUse: String { "\(QuietExecutors.status)" }
