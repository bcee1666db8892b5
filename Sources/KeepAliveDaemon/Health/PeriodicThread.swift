internal import Basics
internal import CLinux

#if canImport(Glibc)
    internal import Glibc
#endif

/// A thread of its own that calls `body` at once and then every `interval` until stopped: for the watchdog,
/// which must keep judging the scheduler when the scheduler's tasks (or the whole cooperative pool) are stuck.
/// It sleeps in `poll(2)` on a pipe, so ``stop()`` wakes it at once and no wakeup is wasted in between.
final class PeriodicThread: Sendable {
    private final class Context: Sendable {
        let interval: Duration
        let body: @Sendable () -> Void
        let wake: Int32

        init(interval: Duration, body: @escaping @Sendable () -> Void, wake: Int32) {
            self.interval = interval
            self.body = body
            self.wake = wake
        }

        func loop() {
            let milliseconds = Int32(clamping: max(1, interval.milliseconds))
            while true {
                body()
                var descriptor = pollfd(fd: wake, events: Int16(POLLIN), revents: 0)
                let ready = poll(&descriptor, 1, milliseconds)
                if ready > 0 { return }  // stop() wrote, or the pipe broke: either way, done
            }
        }
    }

    private let pipeEnds: (read: Int32, write: Int32)
    private let thread: Locked<pthread_t?>

    /// Starts the thread; `nil` when the system has no thread or pipe to spare (the caller logs it).
    init?(interval: Duration, _ body: @escaping @Sendable () -> Void) {
        var ends: [Int32] = [-1, -1]
        guard clinux_pipe_cloexec(&ends) == 0 else { return nil }
        pipeEnds = (ends[0], ends[1])
        let context = Context(interval: interval, body: body, wake: ends[0])
        guard case .success(let created) = PlatformThread.start(name: nil, joinable: true, { context.loop() }) else {
            close(ends[0])
            close(ends[1])
            return nil
        }
        thread = Locked(created)
    }

    /// Wakes the thread, waits for it to end (it finishes a `body` in progress first). Idempotent.
    func stop() {
        guard
            let running = thread.withLock({ thread in
                defer { thread = nil }
                return thread
            })
        else { return }
        var byte: UInt8 = 1
        _ = write(pipeEnds.write, &byte, 1)
        PlatformThread.join(running)
        close(pipeEnds.read)
        close(pipeEnds.write)
    }

    deinit {
        stop()
    }
}
