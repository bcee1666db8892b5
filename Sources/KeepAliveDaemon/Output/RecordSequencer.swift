import KeepAlive
public import Polling
internal import Basics

/// A record with its place in the process's output.
public struct SequencedRecord: Sendable {
    public let record: PollRecord
    /// Contiguous per process, from 0: a gap downstream is a lost record.
    public let sequence: UInt64
    /// The record as one JSON object, no newline (``RecordLine``): made once, for every sink.
    public let line: String
    /// The adapter healing step written into the line, if one was taken since the device's last record.
    public var healing: HealingStep? = nil
}

/// Takes the daemon's records: the JSON Lines output, the MQTT bridge's spool, and whatever comes next.
public protocol RecordSink: Sendable {
    /// Whether ``accept(_:)`` can never wait for someone else (a reader, a disk flush): the sequencer may then run
    /// on the thread that finished the poll.
    var neverBlocks: Bool { get }

    /// Whether the sink reads ``SequencedRecord/line`` (the default): when none does, the sequencer makes no line.
    var needsLine: Bool { get }

    /// One record, in `seq` order, one at a time. The sink takes only its own lock. Throwing stops the output:
    /// no later record goes to any sink, so no `seq` is ever written twice or skipped silently.
    func accept(_ record: SequencedRecord) throws(OutputError)
}

extension RecordSink {
    public var needsLine: Bool { true }
}

/// The one place the daemon's records are numbered: it gives each record its `seq` and its line, then hands it
/// to every sink in turn, as peers.
///
/// Sinks see every record in `seq` order and in the order they were given (the spool before the output: a line
/// in the output is then always in the spool too, even when the process is killed between the two). The
/// sequencer's lock only orders the deliveries; no sink works under another sink's lock.
public final class RecordSequencer: Sendable {
    private struct State {
        var nextSequence: UInt64 = 0
        var failure: OutputError?
    }

    private let sinks: [any RecordSink]
    /// Whether any sink reads the line (the metrics' textfile only counts that a record came).
    private let makesLines: Bool
    private let state = Locked(State())
    private let onFailure: (@Sendable (OutputError) -> Void)?

    /// `onFailure` is called once, when a sink first fails; later records are then counted as lost.
    public init(sinks: [any RecordSink], onFailure: (@Sendable (OutputError) -> Void)? = nil) {
        self.sinks = sinks
        self.makesLines = sinks.contains { $0.needsLine }
        self.onFailure = onFailure
    }

    /// Records numbered so far (the next record's `seq`).
    public var written: UInt64 {
        state.withLock { $0.nextSequence }
    }

    /// The sink failure that stopped the output, if one did.
    public var failure: OutputError? {
        state.withLock { $0.failure }
    }

    /// Whether no sink can wait for anyone (see ``RecordSink/neverBlocks``).
    public var neverBlocks: Bool {
        sinks.allSatisfy(\.neverBlocks)
    }

    /// Numbers `record`, makes its line and hands it to every sink. Safe from any thread. `healing`: a step of the
    /// adapter healing ladder taken since the device's last record, written as `"healing": {"action", "why"}`.
    public func submit(_ record: PollRecord, healing: HealingStep? = nil) {
        let failed: OutputError? = state.withLock { state -> OutputError? in
            guard state.failure == nil else { return nil }
            guard !sinks.isEmpty else {
                // Nothing takes records (the demo shows them its own way): numbered, never encoded.
                state.nextSequence += 1
                return nil
            }
            // Read under the lock: `ts` never goes backwards while `seq` goes forwards.
            let line =
                makesLines
                ? RecordLine.encode(record, sequence: state.nextSequence, at: WallClock.now(), healing: healing) : ""
            let sequenced = SequencedRecord(
                record: record, sequence: state.nextSequence, line: line, healing: healing)
            for sink in sinks {
                do throws(OutputError) {
                    try sink.accept(sequenced)
                } catch {
                    state.failure = error
                    return error
                }
            }
            state.nextSequence += 1
            return nil
        }
        if let failed { onFailure?(failed) }
    }
}
