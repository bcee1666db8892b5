// The fence (see QuietExecutors.swift): without the SPI this file is empty.
#if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS

    // The one value this module takes from the runtime's ABI rather than from a Swift declaration, kept here alone.
    //
    // A default executor must run each job the way the runtime's own does (libdispatch's global executor calls
    // `swift_job_run(job, SerialExecutorRef::generic())`): on the *generic* serial executor, where the runtime may
    // move a task onto an idle actor, and back, on the same thread instead of enqueueing it. Swift 6.3 spells that
    // executor nowhere outside the standard library: `UnownedSerialExecutor(_: Builtin.Executor)` needs
    // `-parse-stdlib`, `_getGenericSerialExecutor()` is internal, and neither `ExperimentalCustomExecutors` nor
    // `ExperimentalScheduling` has it. The public alternative, `job.runSynchronously(on: asUnownedTaskExecutor())`,
    // runs the job with that switching forbidden (and this pool as the task executor): a task that calls an idle
    // actor then costs two jobs instead of one, and a yield followed by an actor call three enqueues instead of two
    // (measured; docs/EXECUTORS.md, "Two things outside the public API").
    //
    // So the reference is built from the runtime's ABI, not guessed: the ABI header `include/swift/ABI/Executor.h`
    // defines `SerialExecutorRef::generic()` as `SerialExecutorRef(nullptr, 0)` (identity and implementation), and
    // `UnownedSerialExecutor` is `@frozen` around that two-word reference: both are part of the concurrency ABI that
    // Apple's platforms have frozen since Swift 5.5. `unsafeBitCast` traps should `UnownedSerialExecutor` ever not be
    // two words;
    // QuietExecutorTests' `tasksEnterAnIdleActorWithoutASecondJob` fails should the runtime stop taking this value
    // for its generic executor (it counts the pool's jobs for tasks that call an idle actor: one each on the generic
    // executor, two on any other).

    @_spi(ExperimentalCustomExecutors) import _Concurrency

    /// The runtime's generic serial executor (`SerialExecutorRef::generic()`): the executor a job of the default
    /// executor runs on.
    let genericSerialExecutor: UnownedSerialExecutor =
        unsafe unsafeBitCast((Int(0), Int(0)), to: UnownedSerialExecutor.self)

    /// Runs `job` on the generic executor, as the runtime's own default executor does.
    @inline(__always)
    func runOnGenericExecutor(_ job: UnownedJob) {
        unsafe job.runSynchronously(on: genericSerialExecutor)
    }

#endif
