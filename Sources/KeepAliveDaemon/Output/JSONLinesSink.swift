internal import Basics

#if canImport(Glibc)
    internal import Glibc
#endif

/// Why an output could not be opened or written.
public struct OutputError: Error, Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var errno: Int32
    public var operation: String

    /// `operation` (`open`, `write to`) on `path` (`-`: standard output) failed with `errno`.
    public init(path: String, errno: Int32, operation: String) {
        self.path = path
        self.errno = errno
        self.operation = operation
    }

    public var description: String {
        """
        cannot \(operation) \(path == "-" ? "standard output" : path): \(String(cString: strerror(errno))) (errno \
        \(errno))
        """
    }
}

/// The JSON Lines output: one line per record, each handed to the kernel with its own `write(2)` as it comes
/// (no buffering to lose on a crash). A sink of the ``RecordSequencer``, which gives it records in `seq` order.
///
/// A file output follows logrotate: ``reopen()`` (the daemon calls it on SIGHUP) opens the path again, and a file
/// moved away or removed is noticed at the next write, which then goes to a new file at the path.
///
/// A write into a regular file that fails (a full disk) loses that record's line only: the part of it that went
/// out is cut off again (or, if that fails too, the next line starts on a fresh line), the loss is reported
/// (``SinkTrouble``), and the records go on to the other sinks and, once there is room, to this one. A write to a
/// pipe or terminal that fails (the reader is gone) stops the output.
///
/// The schema is in the README ("Output"). Timestamps are wall-clock UTC, RFC 3339 with milliseconds.
public final class JSONLinesSink: RecordSink {
    /// Where the lines go: standard output, or a file (regular, or a FIFO a reader drains).
    public let output: DaemonConfiguration.Output
    /// The file open and how writing to it goes.
    private struct State {
        /// The descriptor, -1 once closed.
        var fd: Int32
        var owned: Bool
        /// The file it has open (0 for standard output): a file moved or removed is noticed by these.
        var device: UInt64 = 0
        var inode: UInt64 = 0
        /// The last line was left cut short (a failed write whose part could not be cut off): the next starts
        /// with a newline.
        var unterminated = false
        /// Lines lost to a file that cannot be written.
        var trouble = SinkTrouble()
    }

    /// Its own lock, one per record: a close or a reopen never races a write.
    private let state: Locked<State>
    public let neverBlocks: Bool
    /// Told when the file was opened again, and why (for the log).
    private let onReopen: (@Sendable (String) -> Void)?
    private let reporter: SinkTrouble.Reporter?

    /// Opens the output: standard output, or a file opened for appending (created 0640 when missing). `.none` is
    /// no output: the daemon makes no sink for it. `onReopen` hears of each time the file is opened again.
    public convenience init(
        output: DaemonConfiguration.Output, onReopen: (@Sendable (String) -> Void)? = nil
    ) throws(OutputError) {
        try self.init(output: output, onReopen: onReopen, reporter: nil)
    }

    /// The daemon's: lines lost to a full disk are reported through `reporter`.
    init(
        output: DaemonConfiguration.Output, onReopen: (@Sendable (String) -> Void)?, reporter: SinkTrouble.Reporter?
    ) throws(OutputError) {
        self.output = output
        self.onReopen = onReopen
        self.reporter = reporter
        switch output {
        case .none:
            state = Locked(State(fd: -1, owned: false))
        case .standardOutput:
            state = Locked(State(fd: STDOUT_FILENO, owned: false))
        case .file(let path):
            let (fd, device, inode) = try Self.open(path)
            state = Locked(State(fd: fd, owned: true, device: device, inode: inode))
        }
        self.neverBlocks = Self.neverBlocks(state.withLock { $0.fd })
    }

    /// Opens `path` for appending, and the identity of the file it opened.
    private static func open(_ path: String) throws(OutputError) -> (fd: Int32, device: UInt64, inode: UInt64) {
        let opened = Glibc.open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o640)
        guard opened >= 0 else { throw OutputError(path: path, errno: errno, operation: "open") }
        // A previous run cut short mid-line (a full disk, a kill) left no newline: end that line first, so
        // this run's first record is a line of its own.
        var last: UInt8 = 0
        if lseek(opened, -1, SEEK_END) >= 0, read(opened, &last, 1) == 1, last != UInt8(ascii: "\n") {
            if let error = Self.writeAll("\n", to: opened, path: path) {
                _ = Glibc.close(opened)
                throw error
            }
        }
        var status = stat()
        _ = fstat(opened, &status)
        return (opened, UInt64(status.st_dev), UInt64(status.st_ino))
    }

    /// Opens a file output's path again (logrotate's SIGHUP): later records go to the file there now. Nothing for
    /// standard output. On failure the old file stays in use.
    public func reopen() throws(OutputError) {
        guard case .file(let path) = output else { return }
        let result: Result<Void, OutputError> = state.withLock { state in
            guard state.fd >= 0 else { return .success(()) }
            return Result { () throws(OutputError) in try Self.replace(&state, path: path) }
        }
        try result.get()
    }

    /// The file at `path` instead of the one open (``open(_:)`` ends a cut-short last line of its own).
    private static func replace(_ state: inout State, path: String) throws(OutputError) {
        let (fd, device, inode) = try open(path)
        _ = Glibc.close(state.fd)
        (state.fd, state.owned, state.device, state.inode, state.unterminated) = (fd, true, device, inode, false)
    }

    /// Whether the file open is no longer the one at `path` (moved away or removed).
    private static func moved(_ state: State, path: String) -> Bool {
        var status = stat()
        guard stat(path, &status) == 0 else { return errno == ENOENT }
        return UInt64(status.st_dev) != state.device || UInt64(status.st_ino) != state.inode
    }

    deinit {
        close()
    }

    /// Whether a write can never wait for a reader: a regular file (standard output redirected to one included).
    /// A pipe (journald's, a shell's), a terminal or a socket can make a write wait.
    private static func neverBlocks(_ fd: Int32) -> Bool {
        guard fd >= 0 else { return true }
        var status = stat()
        return fstat(fd, &status) == 0 && status.st_mode & S_IFMT == S_IFREG
    }

    /// Writes the record's line. A failed write to a regular file (ENOSPC, EDQUOT, EIO…) loses this line only and
    /// is reported; a failed write to anything else (EPIPE) stops the output: the sequencer sends no later record
    /// anywhere.
    public func accept(_ record: SequencedRecord) throws(OutputError) {
        // Under this sink's own lock (never another's): a close cannot free the descriptor mid-write.
        var reopened = false
        var event: SinkTrouble.Event?
        let error: OutputError? = state.withLock { state -> OutputError? in
            guard state.fd >= 0 else { return nil }
            if case .file(let path) = output, Self.moved(state, path: path) {
                do throws(OutputError) {
                    try Self.replace(&state, path: path)
                    reopened = true
                } catch {
                    return error
                }
            }
            let line = state.unterminated ? "\n" + record.line + "\n" : record.line + "\n"
            let (written, failed) = ProcessIO.writeCounting(line, to: state.fd)
            guard let failed else {
                state.unterminated = false
                // The clock only when a failure ends, not for every line.
                if state.trouble.isFailing { event = state.trouble.wrote(at: Self.now()) }
                return nil
            }
            let error = OutputError(path: output.description, errno: failed, operation: "write to")
            guard neverBlocks else { return error }
            // A regular file: lose this line only. What went out of it is cut off again.
            if written > 0 {
                var status = stat()
                state.unterminated =
                    fstat(state.fd, &status) != 0 || ftruncate(state.fd, status.st_size - off_t(written)) != 0
            }
            event = state.trouble.failed(
                sequence: record.sequence, reason: String(cString: strerror(failed)), at: Self.now())
            return nil
        }
        if reopened { onReopen?("the output file was moved or removed; writing to a new one at its path") }
        if let event { reporter?.report(event) }
        if let error { throw error }
    }

    /// Closes a file output; standard output is left open. Idempotent.
    public func close() {
        state.withLock { state in
            if state.owned, state.fd >= 0 { _ = Glibc.close(state.fd) }
            state.fd = -1
        }
    }

    private static func now() -> Duration {
        .nanoseconds(clockNanoseconds(CLOCK_MONOTONIC))
    }

    private static func writeAll(_ line: String, to descriptor: Int32, path: String) -> OutputError? {
        ProcessIO.write(line, to: descriptor).map { OutputError(path: path, errno: $0, operation: "write to") }
    }
}
