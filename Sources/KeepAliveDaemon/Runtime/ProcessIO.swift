internal import CLinux
internal import Basics

#if canImport(Glibc)
    internal import Glibc
#endif

/// The process's raw output and signals, shared by the daemon and the `keepalive` command.
public enum ProcessIO {
    /// Writes all of `text` to `descriptor` with `write(2)` (no stdio buffer: a line is out when this
    /// returns), retrying on EINTR and short writes. Returns the errno that stopped it, or `nil`.
    @discardableResult
    public static func write(_ text: String, to descriptor: Int32) -> Int32? {
        writeCounting(text, to: descriptor).error
    }

    /// ``write(_:to:)``, also saying how many bytes went out before an error (a full disk may take part of a
    /// line).
    static func writeCounting(_ text: String, to descriptor: Int32) -> (written: Int, error: Int32?) {
        var text = text
        return text.withUTF8 { buffer -> (Int, Int32?) in
            guard let base = buffer.baseAddress else { return (0, nil) }
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(descriptor, base + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return (offset, errno)
                }
                if written == 0 { return (offset, EIO) }
                offset += written
            }
            return (offset, nil)
        }
    }

    /// The given signals as a stream (their default actions are switched off from the first call on). Call
    /// `cancel` when done: it ends the stream; the signals stay caught and are dropped while no stream wants them.
    ///
    /// A signal handler writes the number to a pipe and one thread of the process reads it
    /// (``SignalRelay``), blocked in `read` between signals: libdispatch's signal sources would start its
    /// workqueue, whose monitor wakes an otherwise idle daemon every second.
    public static func signals(_ numbers: [Int32]) -> (stream: AsyncStream<Int32>, cancel: @Sendable () -> Void) {
        let (stream, continuation) = AsyncStream<Int32>.makeStream()
        let subscription = SignalRelay.shared.subscribe(numbers, continuation)
        return (
            stream,
            {
                SignalRelay.shared.unsubscribe(subscription)
                continuation.finish()
            }
        )
    }
}

/// The process's one reader of the signal pipe (`clinux_signal_to_pipe`): a thread blocked in `read`, handing
/// each signal to the streams that asked for it.
final class SignalRelay: Sendable {
    static let shared = SignalRelay()

    private struct Subscriber {
        var numbers: Set<Int32>
        var continuation: AsyncStream<Int32>.Continuation
    }

    private struct State {
        var subscribers: [UInt64: Subscriber] = [:]
        var next: UInt64 = 0
        var caught: Set<Int32> = []
        var reading = false
    }

    private let state = Locked(State())

    /// Everything is set up under the lock, in order: the pipe, its reader, then the handlers. A signal is routed
    /// to the pipe only once a thread reads it; when the pipe or the thread cannot be made, the signals keep their
    /// default actions (SIGTERM still ends the process, abruptly) and it is said on standard error.
    func subscribe(_ numbers: [Int32], _ continuation: AsyncStream<Int32>.Continuation) -> UInt64 {
        state.withLock { state in
            state.next += 1
            state.subscribers[state.next] = Subscriber(numbers: Set(numbers), continuation: continuation)
            if !state.reading {
                guard startReading() else { return state.next }
                state.reading = true
            }
            for number in numbers where !state.caught.contains(number) {
                if clinux_signal_to_pipe(number) == 0 {
                    state.caught.insert(number)
                } else {
                    ProcessIO.write("keepalive: cannot catch signal \(number): errno \(errno)\n", to: STDERR_FILENO)
                }
            }
            return state.next
        }
    }

    func unsubscribe(_ id: UInt64) {
        state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
    }

    /// Makes the pipe and starts its reader; false (said on standard error) when either cannot be made.
    private func startReading() -> Bool {
        guard clinux_signal_pipe() >= 0 else {
            ProcessIO.write("keepalive: cannot make the signal pipe: errno \(errno)\n", to: STDERR_FILENO)
            return false
        }
        let started = PlatformThread.start(name: "signals") { [self] in readLoop(clinux_signal_pipe()) }
        if case .failure(let error) = started {
            ProcessIO.write("keepalive: cannot start the signal thread: \(error)\n", to: STDERR_FILENO)
            return false
        }
        return true
    }

    /// Forever: each signal number read from the pipe goes to the streams that want it.
    private func readLoop(_ descriptor: Int32) {
        var byte: UInt8 = 0
        while true {
            let count = read(descriptor, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            guard count == 1 else { return }
            let number = Int32(byte)
            let continuations = state.withLock { state in
                state.subscribers.values.filter { $0.numbers.contains(number) }.map(\.continuation)
            }
            for continuation in continuations { continuation.yield(number) }
        }
    }
}
