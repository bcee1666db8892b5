// The fence (see QuietExecutors.swift): without the SPI this file is empty.
#if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS

    // The one use of libdispatch's private interface in this module, kept here alone.
    //
    // `DispatchQueue.main.async` (and a main-queue `DispatchSource`) must keep working while the main thread runs
    // this module's main executor instead of `dispatch_main()`. libdispatch offers nothing public for that on Linux:
    // `dispatch_main()` never returns (it ends the main thread and hands the queue to its workqueue, whose 1-s
    // monitor is what these executors avoid), and Foundation's `RunLoop`, the public way on Darwin, starts that
    // workqueue too. What CoreFoundation's run loop does is what is done here: wait on the main queue's eventfd
    // (`_dispatch_get_main_queue_handle_4CF`) beside the executor's own pipe, and drain the queue
    // (`_dispatch_main_queue_callback_4CF`) when it is readable. Both are exported by libdispatch.so and by
    // libdispatch.a; `CLinux` declares them (no Swift module does), since a static binary does not export them to
    // `dlsym`. QuietExecutorTests' `dispatchMainQueueBlocksRun` runs a `DispatchQueue.main.async` block this way.

    import CLinux
    import Dispatch  // linked for the two functions above (CLinux declares them); no queue is used here

    #if canImport(Glibc)
        import Glibc
    #elseif canImport(Musl)
        import Musl
    #endif

    /// libdispatch's main queue, drained from the thread that runs the main executor.
    enum DispatchMainQueue {
        /// The main queue's eventfd: readable when `DispatchQueue.main` has work. Made at the first call.
        static func descriptor() -> Int32 {
            _dispatch_get_main_queue_handle_4CF()
        }

        /// Clears `descriptor`'s readiness and runs what the main queue holds, on the calling (main) thread.
        static func drain(_ descriptor: Int32) {
            var value: UInt64 = 0
            _ = read(descriptor, &value, MemoryLayout<UInt64>.size)
            _dispatch_main_queue_callback_4CF(nil)
        }
    }

#endif
