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
/// The schema is in the README ("Output"). Timestamps are wall-clock UTC, RFC 3339 with milliseconds.
public final class JSONLinesSink: RecordSink {
    /// Where the lines go: standard output, or a file (regular, or a FIFO a reader drains).
    public let output: DaemonConfiguration.Output
    /// The descriptor, -1 once closed. Its own lock: a close never races a write.
    private let descriptor: Locked<(fd: Int32, owned: Bool)>
    public let neverBlocks: Bool

    /// Opens the output: standard output, or a file opened for appending (created 0640 when missing). `.none` is
    /// no output: the daemon makes no sink for it.
    public init(output: DaemonConfiguration.Output) throws(OutputError) {
        self.output = output
        let fd: Int32
        let owned: Bool
        switch output {
        case .none:
            (fd, owned) = (-1, false)
        case .standardOutput:
            (fd, owned) = (STDOUT_FILENO, false)
        case .file(let path):
            let opened = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o640)
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
            (fd, owned) = (opened, true)
        }
        self.neverBlocks = Self.neverBlocks(fd)
        self.descriptor = Locked((fd, owned))
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

    /// Writes the record's line. A failed write (EPIPE, ENOSPC…) stops the output: the sequencer sends no later
    /// record anywhere.
    public func accept(_ record: SequencedRecord) throws(OutputError) {
        // Under this sink's own lock (never another's): a close cannot free the descriptor mid-write.
        let error: OutputError? = descriptor.withLock { descriptor in
            guard descriptor.fd >= 0 else { return nil }
            return Self.writeAll(record.line + "\n", to: descriptor.fd, path: output.description)
        }
        if let error { throw error }
    }

    /// Closes a file output; standard output is left open. Idempotent.
    public func close() {
        descriptor.withLock { descriptor in
            if descriptor.owned, descriptor.fd >= 0 { _ = Glibc.close(descriptor.fd) }
            descriptor.fd = -1
        }
    }

    private static func writeAll(_ line: String, to descriptor: Int32, path: String) -> OutputError? {
        ProcessIO.write(line, to: descriptor).map { OutputError(path: path, errno: $0, operation: "write to") }
    }
}
