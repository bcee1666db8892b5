import CLinux
import Basics

#if canImport(Glibc)
    import Glibc
#endif

/// The thread of one `MQTTClient`: it waits in `epoll_wait` on the broker socket and an `eventfd`, and runs, in
/// order, the work other threads queue (publishes, subscribes, close) and the socket's and the deadline's
/// handlers. The `epoll_wait` timeout is the one deadline `ClientCore` sets (the next keep-alive check or
/// reconnection); without one the wait is endless. So an idle client costs no wake-up between MQTT's own
/// keep-alive pings, unlike `mosquitto_loop_forever`/`loop_start`, whose `select` returns every second.
///
/// The same shape as `DBus`'s `ConnectionThread`, reduced to what one MQTT connection needs: one descriptor,
/// one deadline, blocks of work (continuations resume their tasks on the global executor).
final class ClientThread: @unchecked Sendable {
    // @unchecked Sendable: `pending`, `isSleeping`, `isStopping`, `hasEnded` are touched only under `mutex`;
    // `watched`, `registered`, `watchedEvents`, `handler`, `deadline` and `deadlineHandler` only on the thread;
    // `epoll` and `wakeup` are immutable and closed once the loop has ended (a late `signal` may then write to a
    // closed descriptor number: it is only written while `isSleeping`, which the ended loop never sets again).
    private let mutex = PthreadMutex()
    private var pending: [() -> Void] = []
    private var isSleeping = false
    private var isStopping = false
    private var hasEnded = false
    private let epoll: Int32
    private let wakeup: Int32
    private let name: String

    /// libmosquitto's socket, by its descriptor number.
    private var watched: Int32 = -1
    /// Our close-on-exec duplicate of `watched`: the one in the epoll set (see `watch`).
    private var registered: Int32 = -1
    private var watchedEvents: UInt32 = 0
    private var handler: ((UInt32) -> Void)?
    private var deadline: Int64?
    private var deadlineHandler: (() -> Void)?

    /// How often the thread came back from a blocking `epoll_wait` (for tests of the idle behaviour).
    let wakeups = Locked(0)

    /// Starts the thread. Throws `.systemCall` when out of descriptors or threads.
    init(name: String) throws(MQTTError) {
        self.name = String(name.utf8.prefix(15)) ?? "mqtt"
        epoll = clinux_epoll_create()
        let epollErrno = errno
        wakeup = clinux_eventfd()
        let wakeupErrno = errno
        guard epoll >= 0, wakeup >= 0 else {
            if epoll >= 0 { close(epoll) }
            if wakeup >= 0 { close(wakeup) }
            throw MQTTError(
                code: .systemCall, call: epoll < 0 ? "epoll_create1" : "eventfd",
                libraryText: String(cString: strerror(epoll < 0 ? epollErrno : wakeupErrno)),
                message: "cannot create the MQTT client's epoll descriptor and eventfd")
        }
        _ = clinux_epoll_control(epoll, clinux_epoll_ctl_add, wakeup, clinux_epollin)
        let started = PlatformThread.start(name: self.name) { [self] in
            pthread_setspecific(ClientThread.currentKey, Unmanaged.passUnretained(self).toOpaque())
            run()
            pthread_setspecific(ClientThread.currentKey, nil)
        }
        if case .failure(let error) = started {
            close(epoll)
            close(wakeup)
            throw MQTTError(
                code: .systemCall, call: "pthread_create", libraryText: error.description,
                message: "cannot start the MQTT client's thread")
        }
    }

    deinit {
        mutex.destroy()
    }

    private static let currentKey: pthread_key_t = {
        var key = pthread_key_t()
        let created = pthread_key_create(&key, nil)
        precondition(created == 0, "pthread_key_create failed: \(created)")
        return key
    }()

    var isCurrent: Bool {
        pthread_getspecific(Self.currentKey) == Unmanaged.passUnretained(self).toOpaque()
    }

    /// Runs `block` on the thread after the work queued before it; false (and `block` dropped) once the thread
    /// has ended.
    @discardableResult
    func async(_ block: @escaping @Sendable () -> Void) -> Bool {
        mutex.lock()
        guard !hasEnded else {
            mutex.unlock()
            return false
        }
        pending.append(block)
        let wake = isSleeping
        isSleeping = false
        if wake {
            var one: UInt64 = 1
            _ = write(wakeup, &one, MemoryLayout<UInt64>.size)
        }
        mutex.unlock()
        return true
    }

    /// Ends the loop once the queue is empty; the descriptors are closed then. On any thread.
    func stop() {
        mutex.lock()
        isStopping = true
        let wake = isSleeping
        isSleeping = false
        if wake {
            var one: UInt64 = 1
            _ = write(wakeup, &one, MemoryLayout<UInt64>.size)
        }
        mutex.unlock()
    }

    // MARK: On the thread only

    /// Watches `fd` for `events` (level-triggered; -1 or 0 events: none). A new descriptor number, or the same
    /// number after a reconnection, is registered again.
    ///
    /// The epoll set holds a close-on-exec duplicate of `fd` that this thread owns, never `fd` itself. An epoll
    /// registration belongs to the open socket, not to its number: libmosquitto closes its socket by itself (a
    /// lost connection, a reconnection), and when a process spawned meanwhile had inherited it (libmosquitto does
    /// not open it close-on-exec), the socket stays open in that child, and so does the registration, while
    /// `EPOLL_CTL_DEL` by the closed number can no longer reach it. The peer's close then kept it readable: a
    /// ThreadSanitizer run of the suite had ten client threads each spinning a core on one (the sockets were held
    /// by the brokers, buses and mocks other tests had started). With a duplicate of our own, removal always works;
    /// and the socket itself is made close-on-exec as soon as it is seen.
    func watch(_ fd: Int32, events: UInt32, isNewSocket: Bool, handler: @escaping (UInt32) -> Void) {
        self.handler = handler
        if fd != watched || isNewSocket {
            unregister()
            watched = fd
            guard fd >= 0 else { return }
            _ = clinux_set_cloexec(fd)
            register(events)
            return
        }
        guard fd >= 0, events != watchedEvents else { return }
        register(events)
    }

    /// Puts `watched` in the epoll set for `events` (through its duplicate), or takes it out for none.
    private func register(_ events: UInt32) {
        guard events != 0 else {
            unregister()
            return
        }
        if registered < 0 {
            registered = clinux_dup_cloexec(watched)
            // Out of descriptors: nothing is watched, and the keep-alive deadline finds the connection dead.
            guard registered >= 0 else { return }
            _ = clinux_epoll_control(epoll, clinux_epoll_ctl_add, registered, events)
        } else {
            _ = clinux_epoll_control(epoll, clinux_epoll_ctl_mod, registered, events)
        }
        watchedEvents = events
    }

    /// Takes the duplicate out of the epoll set and closes it: always possible, as this thread owns it.
    private func unregister() {
        if registered >= 0 {
            _ = clinux_epoll_control(epoll, clinux_epoll_ctl_del, registered, 0)
            close(registered)
            registered = -1
        }
        watchedEvents = 0
    }

    /// Forgets the socket (libmosquitto has closed it, or is about to).
    func unwatch() {
        unregister()
        watched = -1
    }

    /// Calls `handler` at `deadline` (nanoseconds on CLOCK_BOOTTIME, ``now()``), never before; nil clears it.
    func setDeadline(_ deadline: Int64?, _ handler: (() -> Void)? = nil) {
        self.deadline = deadline
        deadlineHandler = deadline == nil ? nil : handler
    }

    var currentDeadline: Int64? { deadline }

    static func now() -> Int64 {
        clockNanoseconds(CLOCK_BOOTTIME)
    }

    // MARK: The loop

    private func run() {
        var batch: [() -> Void] = []
        var descriptors = [Int32](repeating: 0, count: 4)
        var events = [UInt32](repeating: 0, count: 4)
        while true {
            mutex.lock()
            if pending.isEmpty {
                if isStopping {
                    hasEnded = true
                    mutex.unlock()
                    break
                }
                let timeout = Self.milliseconds(until: deadline)
                isSleeping = timeout != 0
                mutex.unlock()
                let count = clinux_epoll_wait(epoll, &descriptors, &events, Int32(descriptors.count), timeout)
                if timeout != 0 {
                    mutex.lock()
                    isSleeping = false
                    mutex.unlock()
                    wakeups.withLock { $0 += 1 }
                }
                if count > 0 {
                    for index in 0..<Int(count) {
                        if descriptors[index] == wakeup {
                            var value: UInt64 = 0
                            _ = read(wakeup, &value, MemoryLayout<UInt64>.size)
                        } else if descriptors[index] == registered {
                            handler?(events[index])
                        }
                    }
                }
                fireDeadline()
                continue
            }
            swap(&batch, &pending)
            mutex.unlock()
            for block in batch { block() }
            batch.removeAll(keepingCapacity: true)
        }
        unwatch()
        handler = nil
        deadlineHandler = nil
        close(epoll)
        close(wakeup)
    }

    private func fireDeadline() {
        guard let due = deadline, Self.now() >= due else { return }
        let handler = deadlineHandler
        deadline = nil
        deadlineHandler = nil
        handler?()
    }

    /// The `epoll_wait` timeout for `deadline`: -1 without one, rounded up so the wait never ends early, at most
    /// 60 s (epoll counts on CLOCK_MONOTONIC, which stops in a suspend; the deadline is on CLOCK_BOOTTIME).
    private static func milliseconds(until deadline: Int64?) -> Int32 {
        guard let deadline else { return -1 }
        let left = deadline - now()
        guard left > 0 else { return 0 }
        return Int32(min((left + 999_999) / 1_000_000, 60_000))
    }
}
