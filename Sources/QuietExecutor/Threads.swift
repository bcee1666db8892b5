// The fence (see QuietExecutors.swift): without the SPI this file is empty.
#if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS

    #if canImport(Glibc)
        import Glibc
    #elseif canImport(Musl)
        import Musl
    #endif

    import Basics

    // MARK: - the executors' threads

    /// Runs `body` with the signal mask every thread of these executors starts with: the process's signals
    /// blocked, as libdispatch's workers have them, so that process-directed signals (SIGTERM, SIGINT, …) go to
    /// the main thread. Not the signals of a fault: blocked, the kernel would kill the process at a trap without
    /// Swift's backtrace (the list libdispatch leaves unblocked). A thread created inside `body` inherits the mask,
    /// and so do the threads it starts (D-Bus, MQTT, the timerfd thread).
    func withExecutorSignalMask<T>(_ body: () -> T) -> T {
        var all = sigset_t()
        var old = sigset_t()
        sigfillset(&all)
        for fault in [SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGSYS, SIGPIPE, SIGPROF] {
            sigdelset(&all, fault)
        }
        pthread_sigmask(SIG_SETMASK, &all, &old)
        defer { pthread_sigmask(SIG_SETMASK, &old, nil) }
        return body()
    }

    /// Starts a detached worker thread running `body`, with the executors' signal mask and a 1 MiB stack
    /// (libdispatch's workers have 512 KiB, the main thread more); false when `pthread_create` failed.
    @discardableResult
    func spawnExecutorThread(name: String, _ body: @escaping @Sendable () -> Void) -> Bool {
        let started = withExecutorSignalMask { PlatformThread.start(name: name, stackSize: 1 << 20, body) }
        if case .success = started { return true }
        return false
    }

    /// Kernel thread id of the calling thread, from the /proc/thread-self symlink ("PID/task/TID").
    /// (gettid()/syscall() are not importable from Swift's Glibc module.)
    func currentThreadID() -> Int32 {
        var buf = [CChar](repeating: 0, count: 64)
        let n = readlink("/proc/thread-self", &buf, 63)
        guard n > 0 else { return -1 }
        let s = String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return Int32(s.split(separator: "/").last ?? "") ?? -1
    }

    /// Scheduler state letter of a thread of this process ('R' running/runnable, 'S', 'D', ...).
    func threadState(_ tid: Int32) -> UInt8 {
        let fd = open("/proc/self/task/\(tid)/stat", O_RDONLY)
        if fd < 0 { return 0 }
        defer { close(fd) }
        var buf = [UInt8](repeating: 0, count: 256)
        let n = read(fd, &buf, 256)
        guard n > 0 else { return 0 }
        // "tid (comm) S ..." — comm may contain spaces/parens; the state follows the LAST ')'.
        guard let rp = buf[0..<n].lastIndex(of: UInt8(ascii: ")")), rp + 2 < n else { return 0 }
        return buf[rp + 2]
    }

#endif
