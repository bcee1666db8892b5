import CDBus
import Dispatch
import Timing

/// Drives one libdbus connection from DispatchSources on the connection's serial queue.
///
/// libdbus asks for "watches" (a file descriptor to poll for reading or writing) and "timeouts" (pending-call
/// deadlines); we answer with one read or write source per watch and a *single* timer for all timeouts, armed
/// for the earliest deadline and disarmed when no timeout is left. The timer is an entry on the process's
/// timerfd thread (`Timing.TimerThread`), not a DispatchSourceTimer left armed for a reply that came long ago:
/// a pending-call timeout is 25–35 s, so it used to fire between a daemon's ticks, waking it for nothing.
/// After libdbus has handled I/O we dispatch the queued messages. A thread looping on
/// `dbus_connection_read_write_dispatch` is not an option: sends from other threads stall until its poll wakes,
/// and pending-call timeouts never fire.
///
/// ```swift
/// let loop = MainLoop(connection: handle.pointer, queue: executor.queue)
/// executor.queue.async { loop.start() }
/// ```
final class MainLoop: @unchecked Sendable {
    // @unchecked Sendable: all stored state is read and written on `queue` only. libdbus invokes the watch,
    // timeout and dispatch-status functions from the thread that calls into the connection, and this module
    // calls into the connection only on `queue`; the object crosses threads only inside blocks bound for it.

    private struct Watch {
        var read: (any DispatchSourceRead)?
        var write: (any DispatchSourceWrite)?
        var isResumed = false
    }

    private struct Timeout {
        /// Since boot (`TimerThread.now()`).
        var deadline: Duration
        var isEnabled: Bool
    }

    let queue: DispatchQueue
    private let connection: RawConnection
    private var watches: [RawWatch: Watch] = [:]
    private var timeouts: [RawTimeout: Timeout] = [:]
    /// The timer thread's entry for the earliest deadline; `armGeneration` tells a stale firing from the current.
    private var timer: UInt64?
    private var armGeneration: UInt64 = 0
    private var armedDeadline: Duration?
    private var isDrainScheduled = false
    /// True while a watch or timer handler runs; it drains on its way out, so no extra drain is queued.
    private var isHandling = false
    private(set) var isStopped = false

    init(connection: RawConnection, queue: DispatchQueue) {
        self.connection = connection
        self.queue = queue
    }

    /// Installs the watch, timeout and dispatch-status functions. Call on `queue`.
    func start() {
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

    /// Cancels every source; later callbacks and queued drains become no-ops. Call on `queue`, before closing.
    func stop() {
        guard !isStopped else { return }
        isStopped = true
        for (_, watch) in watches { cancel(watch) }
        watches.removeAll()
        timeouts.removeAll()
        disarm()
    }

    private static func from(_ context: UnsafeMutableRawPointer?) -> MainLoop {
        Unmanaged<MainLoop>.fromOpaque(context!).takeUnretainedValue()
    }

    private static let releaseContext: DBusFreeFunction = { context in
        Unmanaged<MainLoop>.fromOpaque(context!).release()
    }

    // MARK: Dispatching

    /// Runs every queued message through libdbus (pending-call replies, our filter).
    func drain() {
        while !isStopped, libdbus_connection_dispatch(connection) {}
    }

    private func scheduleDrain() {
        guard !isDrainScheduled, !isHandling, !isStopped else { return }
        isDrainScheduled = true
        queue.async { [self] in
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
        let fd = libdbus_watch_get_unix_fd(rawWatch)
        let flags = libdbus_watch_get_flags(rawWatch)
        var watch = Watch()
        let pointer = WatchPointer(raw: rawWatch)
        if flags.readable {
            let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler { [weak self] in self?.handle(pointer, readable: true) }
            watch.read = source
        }
        if flags.writable {
            let source = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler { [weak self] in self?.handle(pointer, readable: false) }
            watch.write = source
        }
        watches[rawWatch] = watch
        if libdbus_watch_get_enabled(rawWatch) { setResumed(rawWatch, true) }
        return true
    }

    private func removeWatch(_ rawWatch: RawWatch) {
        guard let watch = watches.removeValue(forKey: rawWatch) else { return }
        cancel(watch)
    }

    private func toggleWatch(_ rawWatch: RawWatch) {
        setResumed(rawWatch, libdbus_watch_get_enabled(rawWatch))
    }

    private func setResumed(_ rawWatch: RawWatch, _ resumed: Bool) {
        guard var watch = watches[rawWatch], watch.isResumed != resumed else { return }
        watch.isResumed = resumed
        watches[rawWatch] = watch
        if resumed {
            watch.read?.resume()
            watch.write?.resume()
        } else {
            watch.read?.suspend()
            watch.write?.suspend()
        }
    }

    private func cancel(_ watch: Watch) {
        watch.read?.cancel()
        watch.write?.cancel()
        // libdispatch requires a suspended source to be resumed before it is released; cancelled, it stays quiet.
        if !watch.isResumed {
            watch.read?.resume()
            watch.write?.resume()
        }
    }

    private func handle(_ pointer: WatchPointer, readable: Bool) {
        // A source cancelled on this queue never fires again, so the watch is still alive here.
        guard !isStopped, watches[pointer.raw] != nil else { return }
        isHandling = true
        libdbus_watch_handle(pointer.raw, readable: readable)
        drain()
        isHandling = false
    }

    // MARK: Timeouts

    private func addTimeout(_ rawTimeout: RawTimeout) -> Bool {
        guard !isStopped else { return false }
        let enabled = libdbus_timeout_get_enabled(rawTimeout)
        let deadline = Self.deadline(after: rawTimeout)
        timeouts[rawTimeout] = Timeout(deadline: deadline, isEnabled: enabled)
        if enabled { arm(for: deadline) }
        return true
    }

    private func removeTimeout(_ rawTimeout: RawTimeout) {
        timeouts[rawTimeout] = nil
        // With others left the timer may stay armed for this one's deadline (firing early with nothing due is
        // harmless, and cheaper than re-arming per reply); with none left it must not wake an idle process.
        if !timeouts.values.contains(where: \.isEnabled) { disarm() }
    }

    private func toggleTimeout(_ rawTimeout: RawTimeout) {
        guard timeouts[rawTimeout] != nil else { return }
        let enabled = libdbus_timeout_get_enabled(rawTimeout)
        let deadline = Self.deadline(after: rawTimeout)
        timeouts[rawTimeout] = Timeout(deadline: deadline, isEnabled: enabled)
        if enabled {
            arm(for: deadline)
        } else if !timeouts.values.contains(where: \.isEnabled) {
            disarm()
        }
    }

    private static func deadline(after rawTimeout: RawTimeout) -> Duration {
        TimerThread.now() + .milliseconds(max(0, libdbus_timeout_get_interval(rawTimeout)))
    }

    private func arm(for deadline: Duration) {
        guard !isStopped, armedDeadline.map({ deadline < $0 }) ?? true else { return }
        if let timer { TimerThread.shared.cancel(timer) }
        armGeneration += 1
        armedDeadline = deadline
        let generation = armGeneration
        // On the timer thread: hand over to the queue at once.
        timer = TimerThread.shared.schedule(at: deadline) { [weak self, queue] in
            queue.async { [weak self] in self?.timerFired(generation) }
        }
    }

    private func disarm() {
        if let timer { TimerThread.shared.cancel(timer) }
        timer = nil
        armedDeadline = nil
        armGeneration += 1
    }

    private func timerFired(_ generation: UInt64) {
        // Re-armed or disarmed after this firing was queued: the current arming (if any) is still pending.
        guard generation == armGeneration, !isStopped else { return }
        timer = nil
        armedDeadline = nil
        let now = TimerThread.now()
        let due = timeouts.filter { $0.value.isEnabled && $0.value.deadline <= now }.map(\.key)
        isHandling = true
        defer { isHandling = false }
        for rawTimeout in due {
            // Handling one timeout may remove others (or itself): check again, and re-arm the survivors —
            // libdbus timeouts repeat until they are removed or disabled.
            guard var timeout = timeouts[rawTimeout], timeout.isEnabled else { continue }
            timeout.deadline = Self.deadline(after: rawTimeout)
            timeouts[rawTimeout] = timeout
            libdbus_timeout_handle(rawTimeout)
        }
        if !due.isEmpty { drain() }
        if let next = timeouts.values.filter(\.isEnabled).map(\.deadline).min() { arm(for: next) }
    }
}

/// A `DBusWatch*` captured by a source handler that runs on the connection's queue only.
private struct WatchPointer: @unchecked Sendable {
    // @unchecked Sendable: the pointer is only dereferenced (by libdbus) on the connection's queue, while the
    // watch is registered.
    let raw: RawWatch
}
