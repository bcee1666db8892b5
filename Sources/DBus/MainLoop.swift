import CDBus
import CLinux

/// Drives one libdbus connection from the connection's own thread (`ConnectionThread`).
///
/// libdbus asks for "watches" (a file descriptor to poll for reading or writing; it keeps a read watch and a
/// write watch on the same socket, each enabled and disabled on its own) and "timeouts" (the deadlines of its
/// pending calls; this module sends its calls without them — see `OutstandingCalls` — so there are none unless
/// libdbus makes one of its own). We keep one `epoll` registration per descriptor for the union of its enabled
/// watches, and one deadline for all timeouts — the earliest — which the thread passes to `epoll_wait` as its
/// timeout, like a C client's `poll`: no timer to program per call, and none left when no timeout is (a timer
/// left armed for a reply that came long ago would wake an idle daemon for nothing). Removing a timeout other
/// than the last leaves the deadline where it is: waking early with nothing due is harmless and rarer than
/// removals. After libdbus has handled I/O we dispatch the queued messages. A thread looping on
/// `dbus_connection_read_write_dispatch` is not an option: sends from other threads stall until its poll wakes,
/// and timeouts never fire.
///
/// ```swift
/// let loop = MainLoop(connection: handle.pointer, thread: thread)
/// thread.async { loop.start() }
/// ```
final class MainLoop: @unchecked Sendable {
    // @unchecked Sendable: all stored state is read and written on `thread` only. libdbus invokes the watch,
    // timeout and dispatch-status functions from the thread that calls into the connection, and this module
    // calls into the connection only on `thread`; the object crosses threads only inside blocks bound for it.

    private struct Watch {
        var raw: RawWatch
        var fd: Int32
        var readable: Bool
        var writable: Bool
        var isEnabled: Bool
    }

    private struct Timeout {
        var raw: RawTimeout
        /// Nanoseconds since boot (`ConnectionThread.now()`).
        var deadline: Int64
        var isEnabled: Bool
    }

    let thread: ConnectionThread
    private let connection: RawConnection
    // Arrays, not dictionaries: libdbus keeps two watches (read, write) and one timeout per pending call of its
    // own (none in practice); the watches are looked up on every message.
    private var watches: [Watch] = []
    private var timeouts: [Timeout] = []
    /// The deadline the thread waits for (the earliest enabled timeout's, or an earlier one since removed).
    private var armedDeadline: Int64?
    private var isDrainScheduled = false
    /// True while a watch or timer handler runs; it drains on its way out, so no extra drain is queued.
    private var isHandling = false
    private(set) var isStopped = false

    init(connection: RawConnection, thread: ConnectionThread) {
        self.connection = connection
        self.thread = thread
    }

    /// Installs the watch, timeout and dispatch-status functions. Call on `thread`.
    func start() {
        thread.setDeadlineHandler(for: .libdbus) { [weak self] in self?.timerFired() }
        // Each registration holds its own reference to `self`, released by libdbus through `releaseContext`.
        _ = libdbus_connection_set_watch_functions(
            connection,
            add: { watch, context in MainLoop.from(context).addWatch(watch!) ? 1 : 0 },
            remove: { watch, context in MainLoop.from(context).removeWatch(watch!) },
            toggled: { watch, context in MainLoop.from(context).toggleWatch(watch!) },
            data: Unmanaged.passRetained(self).toOpaque(), free: MainLoop.releaseContext)
        _ = libdbus_connection_set_timeout_functions(
            connection,
            add: { timeout, context in MainLoop.from(context).addTimeout(timeout!) ? 1 : 0 },
            remove: { timeout, context in MainLoop.from(context).removeTimeout(timeout!) },
            toggled: { timeout, context in MainLoop.from(context).toggleTimeout(timeout!) },
            data: Unmanaged.passRetained(self).toOpaque(), free: MainLoop.releaseContext)
        libdbus_connection_set_dispatch_status_function(
            connection,
            { _, status, context in MainLoop.from(context).dispatchStatusChanged(status) },
            data: Unmanaged.passRetained(self).toOpaque(), free: MainLoop.releaseContext)
        // Messages may already wait (NameAcquired after Hello): the status function only reports changes.
        if libdbus_connection_has_data_remaining(connection) { scheduleDrain() }
    }

    /// Forgets every descriptor; later callbacks and queued drains become no-ops. Call on `thread`, before
    /// closing.
    func stop() {
        guard !isStopped else { return }
        isStopped = true
        for fd in Set(watches.map(\.fd)) { thread.unwatch(fd) }
        watches.removeAll()
        timeouts.removeAll()
        disarm()
        thread.setDeadlineHandler(for: .libdbus, nil)
    }

    private static func from(_ context: UnsafeMutableRawPointer?) -> MainLoop {
        Unmanaged<MainLoop>.fromOpaque(context!).takeUnretainedValue()
    }

    private static let releaseContext: DBusFreeFunction = { context in
        Unmanaged<MainLoop>.fromOpaque(context!).release()
    }

    // MARK: Dispatching

    /// Runs every queued message through libdbus (and so through our filter).
    func drain() {
        while !isStopped, libdbus_connection_dispatch(connection) {}
    }

    private func scheduleDrain() {
        guard !isDrainScheduled, !isHandling, !isStopped else { return }
        isDrainScheduled = true
        thread.async { [self] in
            isDrainScheduled = false
            drain()
        }
    }

    private func dispatchStatusChanged(_ status: DBusDispatchStatus) {
        // Never dispatch from inside this callback (libdbus forbids it): queue a drain instead.
        if status == DBUS_DISPATCH_DATA_REMAINS { scheduleDrain() }
    }

    // MARK: Watches

    private func addWatch(_ rawWatch: RawWatch) -> Bool {
        guard !isStopped else { return false }
        let flags = libdbus_watch_get_flags(rawWatch)
        let fd = libdbus_watch_get_unix_fd(rawWatch)
        watches.append(Watch(
            raw: rawWatch, fd: fd, readable: flags.readable, writable: flags.writable,
            isEnabled: libdbus_watch_get_enabled(rawWatch)))
        updateInterest(in: fd)
        return true
    }

    private func removeWatch(_ rawWatch: RawWatch) {
        guard let index = watches.firstIndex(where: { $0.raw == rawWatch }) else { return }
        let fd = watches.remove(at: index).fd
        updateInterest(in: fd)
    }

    private func toggleWatch(_ rawWatch: RawWatch) {
        guard let index = watches.firstIndex(where: { $0.raw == rawWatch }) else { return }
        let enabled = libdbus_watch_get_enabled(rawWatch)
        guard watches[index].isEnabled != enabled else { return }
        watches[index].isEnabled = enabled
        updateInterest(in: watches[index].fd)
    }

    /// Registers `fd` for what its enabled watches want (nothing: unregistered).
    private func updateInterest(in fd: Int32) {
        var events: UInt32 = 0
        for watch in watches where watch.fd == fd && watch.isEnabled {
            if watch.readable { events |= clinux_epollin }
            if watch.writable { events |= clinux_epollout }
        }
        thread.watch(fd, events: events) { [weak self] events in self?.handle(fd, events: events) }
    }

    private func handle(_ fd: Int32, events: UInt32) {
        guard !isStopped else { return }
        isHandling = true
        let hangup = events & (clinux_epollhup | clinux_epollerr)
        // Handling one watch may remove or disable the other (libdbus disconnects on a hang-up): look again.
        for candidate in watches where candidate.fd == fd {
            guard let watch = watches.first(where: { $0.raw == candidate.raw }), watch.isEnabled, !isStopped
            else { continue }
            var flags = hangup
            if watch.readable { flags |= events & clinux_epollin }
            if watch.writable { flags |= events & clinux_epollout }
            guard flags != 0 else { continue }
            libdbus_watch_handle(
                watch.raw, readable: flags & clinux_epollin != 0, writable: flags & clinux_epollout != 0,
                hangup: flags & clinux_epollhup != 0, error: flags & clinux_epollerr != 0)
        }
        drain()
        isHandling = false
    }

    // MARK: Timeouts

    private func addTimeout(_ rawTimeout: RawTimeout) -> Bool {
        guard !isStopped else { return false }
        let enabled = libdbus_timeout_get_enabled(rawTimeout)
        let deadline = Self.deadline(after: rawTimeout)
        timeouts.append(Timeout(raw: rawTimeout, deadline: deadline, isEnabled: enabled))
        if enabled { arm(for: deadline) }
        return true
    }

    private func removeTimeout(_ rawTimeout: RawTimeout) {
        if let index = timeouts.firstIndex(where: { $0.raw == rawTimeout }) { timeouts.remove(at: index) }
        // With others left the timer may stay armed for this one's deadline (firing early with nothing due is
        // harmless, and cheaper than re-arming per reply); with none left it must not wake an idle process.
        if !timeouts.contains(where: \.isEnabled) { disarm() }
    }

    private func toggleTimeout(_ rawTimeout: RawTimeout) {
        guard let index = timeouts.firstIndex(where: { $0.raw == rawTimeout }) else { return }
        let enabled = libdbus_timeout_get_enabled(rawTimeout)
        let deadline = Self.deadline(after: rawTimeout)
        timeouts[index] = Timeout(raw: rawTimeout, deadline: deadline, isEnabled: enabled)
        if enabled {
            arm(for: deadline)
        } else if !timeouts.contains(where: \.isEnabled) {
            disarm()
        }
    }

    private static func deadline(after rawTimeout: RawTimeout) -> Int64 {
        ConnectionThread.now() + Int64(max(0, libdbus_timeout_get_interval(rawTimeout))) * 1_000_000
    }

    private func arm(for deadline: Int64) {
        guard !isStopped, armedDeadline.map({ deadline < $0 }) ?? true else { return }
        armedDeadline = deadline
        thread.setDeadline(deadline, for: .libdbus)
    }

    private func disarm() {
        guard armedDeadline != nil else { return }
        armedDeadline = nil
        thread.setDeadline(nil, for: .libdbus)
    }

    private func timerFired() {
        guard !isStopped else { return }
        armedDeadline = nil
        let now = ConnectionThread.now()
        let due = timeouts.filter { $0.isEnabled && $0.deadline <= now }.map(\.raw)
        isHandling = true
        defer { isHandling = false }
        for rawTimeout in due {
            // Handling one timeout may remove others (or itself): check again, and re-arm the survivors —
            // libdbus timeouts repeat until they are removed or disabled.
            guard let index = timeouts.firstIndex(where: { $0.raw == rawTimeout }), timeouts[index].isEnabled
            else { continue }
            timeouts[index].deadline = Self.deadline(after: rawTimeout)
            libdbus_timeout_handle(rawTimeout)
        }
        if !due.isEmpty { drain() }
        if let next = timeouts.filter(\.isEnabled).map(\.deadline).min() { arm(for: next) }
    }
}
