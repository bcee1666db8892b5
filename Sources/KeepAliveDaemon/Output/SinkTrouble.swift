internal import KeepAlive
internal import Logging

/// A sink that cannot write for a while (its disk is full) loses the records of that while and goes on; this
/// keeps the account, so the loss is said once when it begins, once an hour while it lasts, and once when it
/// ends, with how many records and which `seq`s, instead of once per record. Pure: instants come in.
///
/// ```swift
/// var trouble = SinkTrouble()
/// if let event = trouble.failed(sequence: 41, reason: "No space left on device", at: now) { report(event) }
/// if let event = trouble.wrote(at: now) { report(event) }  // .ended: 7 records, seq 41–47, over 21s
/// ```
struct SinkTrouble: Sendable {
    /// What to tell the operator.
    enum Event: Sendable, Hashable {
        /// The first record lost: the sink cannot write (`reason`).
        case began(reason: String, sequence: UInt64)
        /// Still failing an hour after the last word: `lost` records so far, the newest `reason`.
        case continues(reason: String, lost: UInt64, over: Duration)
        /// A record was written again after `lost` were not: `seq` `first` through `last`, over `span`.
        case ended(lost: UInt64, first: UInt64, last: UInt64, over: Duration)
    }

    private struct Failing: Sendable {
        var since: Duration
        var lastWord: Duration
        var first: UInt64
        var last: UInt64
        var lost: UInt64
    }

    /// How long a failure goes on before it is said again.
    let every: Duration
    private var failing: Failing?

    init(every: Duration = .seconds(3_600)) {
        self.every = every
    }

    /// Whether the sink is failing now.
    var isFailing: Bool { failing != nil }

    /// Records lost since the failure began (0 when writing).
    var lost: UInt64 { failing?.lost ?? 0 }

    /// The record `sequence` could not be written, for `reason`.
    mutating func failed(sequence: UInt64, reason: String, at now: Duration) -> Event? {
        guard var current = failing else {
            failing = Failing(since: now, lastWord: now, first: sequence, last: sequence, lost: 1)
            return .began(reason: reason, sequence: sequence)
        }
        current.last = sequence
        current.lost += 1
        defer { failing = current }
        guard now - current.lastWord >= every else { return nil }
        current.lastWord = now
        return .continues(reason: reason, lost: current.lost, over: now - current.since)
    }

    /// A record was written: the end of a failure, if there was one.
    mutating func wrote(at now: Duration) -> Event? {
        guard let current = failing else { return nil }
        failing = nil
        return .ended(lost: current.lost, first: current.first, last: current.last, over: now - current.since)
    }
}

extension SinkTrouble {
    /// Where a sink's trouble goes: the log, `STATUS=` and the MQTT `health` topic (through the status board).
    struct Reporter: Sendable {
        /// The sink, in words: `the MQTT spool`, `the output file`.
        let sink: String
        let status: StatusBoard
        let notifier: SystemdNotifier?
        let logger: Logger

        func report(_ event: Event) {
            switch event {
            case .began(let reason, let sequence):
                logger.error(
                    "\(sink) cannot write: its records are lost until it can again",
                    metadata: ["error": "\(reason)", "seq": "\(sequence)"])
                status.withLock { $0.failingSinks[sink] = reason }
            case .continues(let reason, let lost, let over):
                logger.error(
                    "\(sink) still cannot write",
                    metadata: ["error": "\(reason)", "lost": "\(lost)", "for": "\(over.compact)"])
                status.withLock { $0.failingSinks[sink] = reason }
            case .ended(let lost, let first, let last, let over):
                logger.notice(
                    "\(sink) writes again",
                    metadata: [
                        "lost": "\(lost)", "seq": first == last ? "\(first)" : "\(first)-\(last)",
                        "for": "\(over.compact)",
                    ])
                status.withLock { _ = $0.failingSinks.removeValue(forKey: sink) }
            }
            Daemon.publish(status, to: notifier)
        }
    }
}
