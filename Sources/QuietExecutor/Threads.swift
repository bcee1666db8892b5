// The fence (see QuietExecutors.swift): without the SPI this file is empty.
#if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS

    #if canImport(Glibc)
        import Glibc
    #elseif canImport(Musl)
        import Musl
    #endif

    // MARK: - small pthread helpers

    // @unchecked Sendable: a pthread mutex, allocated once and never moved, is made to be shared between threads.
    final class ExecutorMutex: @unchecked Sendable {
        let m: UnsafeMutablePointer<pthread_mutex_t>
        init() {
            m = .allocate(capacity: 1)
            m.initialize(to: pthread_mutex_t())
            pthread_mutex_init(m, nil)
        }
        @inline(__always) func lock() { pthread_mutex_lock(m) }
        @inline(__always) func unlock() { pthread_mutex_unlock(m) }
    }

    // @unchecked Sendable: a pthread condition variable, allocated once and never moved, is made to be shared.
    final class ExecutorCondition: @unchecked Sendable {
        let c: UnsafeMutablePointer<pthread_cond_t>
        init() {
            c = .allocate(capacity: 1)
            c.initialize(to: pthread_cond_t())
            var attr = pthread_condattr_t()
            pthread_condattr_init(&attr)
            pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
            pthread_cond_init(c, &attr)
            pthread_condattr_destroy(&attr)
        }
        @inline(__always) func wait(_ mu: ExecutorMutex) { pthread_cond_wait(c, mu.m) }
        /// Waits until `deadlineMono` (CLOCK_MONOTONIC ns).
        func wait(_ mu: ExecutorMutex, untilMono deadlineMono: Int64) {
            var ts = timespec(
                tv_sec: Int(deadlineMono / 1_000_000_000),
                tv_nsec: Int(deadlineMono % 1_000_000_000))
            _ = pthread_cond_timedwait(c, mu.m, &ts)
        }
        @inline(__always) func signal() { pthread_cond_signal(c) }
        @inline(__always) func broadcast() { pthread_cond_broadcast(c) }
    }

    @inline(__always)
    func nowNanoseconds(_ clk: clockid_t) -> Int64 {
        var ts = timespec()
        clock_gettime(clk, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

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

    /// Starts a detached thread running `body`; false when `pthread_create` failed.
    @discardableResult
    func spawnExecutorThread(name: String, _ body: @escaping () -> Void) -> Bool {
        final class Box {
            let body: () -> Void
            let name: String
            init(_ b: @escaping () -> Void, _ n: String) {
                body = b
                name = n
            }
        }
        let box = Unmanaged.passRetained(Box(body, name)).toOpaque()
        var attr = pthread_attr_t()
        pthread_attr_init(&attr)
        pthread_attr_setdetachstate(&attr, Int32(PTHREAD_CREATE_DETACHED))
        pthread_attr_setstacksize(&attr, 1 << 20)  // 1 MiB: libdispatch's workers have 512 KiB, the main thread more
        var tid = pthread_t()
        let rc = withExecutorSignalMask {
            pthread_create(
                &tid, &attr,
                { arg in
                    let b = Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue()
                    setThreadName(b.name)
                    b.body()
                    return nil
                }, box)
        }
        pthread_attr_destroy(&attr)
        if rc != 0 {
            Unmanaged<Box>.fromOpaque(box).release()
            return false
        }
        return true
    }

    /// pthread_setname_np is not imported without _GNU_SOURCE; write /proc/thread-self/comm.
    private func setThreadName(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY)
        if fd < 0 { return }
        _ = name.withCString { write(fd, $0, min(strlen($0), 15)) }
        close(fd)
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
