internal import KeepAlive
internal import Logging
internal import Basics

#if canImport(Glibc)
    internal import Glibc
#endif

/// `metrics: textfile: PATH`: the registry rendered as Prometheus text 0.0.4 for node_exporter's textfile
/// collector, replaced atomically (written beside it as `PATH.tmp`, which the collector's `*.prom` never matches,
/// then renamed over it), so a scrape never reads half a file.
///
/// A record sink among the others: a record asks for a write, and writes are coalesced to at most one a second. A
/// record that comes sooner is written by one deferred write a second after the last, so the end of a tick's
/// batch is in the file within a second, and an idle daemon is never woken: no timer runs without records.
final class MetricsTextfile: RecordSink, Sendable {
    let path: String
    private let temporaryPath: String
    private let registry: MetricsRegistry
    private let logger: Logger
    private let clock = TimerFDClock()
    private let spacing: Duration
    /// When the last write began, and whether a deferred one is waiting.
    private let schedule = Locked<(last: TimerFDClock.Instant?, deferred: Bool)>((nil, false))
    /// Held for a whole write: two writes never share the temporary file.
    private let writing = Locked(0)

    /// Writes the file once, so that a path that cannot be written fails the start.
    init(path: String, registry: MetricsRegistry, logger: Logger, spacing: Duration = .seconds(1)) throws(OutputError) {
        self.path = path
        temporaryPath = path + ".tmp"
        self.registry = registry
        self.logger = logger
        self.spacing = spacing
        if let failure = write() { throw failure }
    }

    /// Only asks for a write: never waits for the disk.
    var neverBlocks: Bool { true }

    /// The record's counts are the engine's (counted where it published the record): no line is read.
    var needsLine: Bool { false }

    func accept(_ record: SequencedRecord) throws(OutputError) {
        requestWrite()
    }

    /// A write now when the last was at least `spacing` ago, else one deferred write at `last + spacing`.
    func requestWrite() {
        let now = clock.now
        let due = schedule.withLock { schedule -> TimerFDClock.Instant? in
            guard !schedule.deferred else { return nil }
            guard let last = schedule.last, now < last.advanced(by: spacing) else {
                schedule.last = now
                return now
            }
            schedule.deferred = true
            return last.advanced(by: spacing)
        }
        guard let due else { return }
        Task { [self] in
            if due > now {
                try? await clock.sleep(until: due, tolerance: nil)
                schedule.withLock { schedule in
                    schedule.deferred = false
                    schedule.last = clock.now
                }
            }
            if let failure = write() {
                logger.warning("cannot write the metrics textfile", metadata: ["error": "\(failure)"])
            }
        }
    }

    /// Renders and replaces the file; the failure, if any.
    @discardableResult
    func write() -> OutputError? {
        let text = registry.render(.prometheus)
        return writing.withLock { _ -> OutputError? in
            let descriptor = open(temporaryPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else {
                return OutputError(path: temporaryPath, errno: errno, operation: "create")
            }
            let failed = ProcessIO.write(text, to: descriptor)
            close(descriptor)
            if let failed {
                unlink(temporaryPath)
                return OutputError(path: temporaryPath, errno: failed, operation: "write to")
            }
            guard rename(temporaryPath, path) == 0 else {
                let code = errno
                unlink(temporaryPath)
                return OutputError(path: path, errno: code, operation: "rename onto")
            }
            return nil
        }
    }
}
