internal import Logging
internal import Basics

/// The daemon's log flood guard (issue #15): a ``RepeatSuppressor`` behind a lock, shared by every
/// ``DaemonLogHandler`` of the process. It thins info and warning lines that carry a `device` and an `error`
/// (a poll that fails the same way every tick); errors and everything else are always written.
///
/// ```swift
/// let repeats = RepeatedWarnings()
/// LoggingSystem.bootstrap { DaemonLogHandler(label: $0, level: .info, repeats: repeats) }
/// options.repeatedWarnings = repeats  // the daemon flushes a device's summary when it works again
/// ```
public final class RepeatedWarnings: Sendable {
    private struct State {
        var suppressor: RepeatSuppressor
        /// How each counted warning was logged, for its summary line.
        var levels: [RepeatSuppressor.Key: (Logger.Level, DaemonLogHandler.Style)] = [:]
    }

    private let state: Locked<State>
    private let now: @Sendable () -> Duration

    /// `window`: how long repeats are counted before a summary may go out; `now`: a monotonic clock (tests pass
    /// a manual one).
    public init(window: Duration = .seconds(3_600), now: (@Sendable () -> Duration)? = nil) {
        state = Locked(State(suppressor: RepeatSuppressor(window: window)))
        let origin = ContinuousClock.now
        self.now = now ?? { ContinuousClock.now - origin }
    }

    /// Whether to write this line; writes the summary first when one is due.
    func admit(
        level: Logger.Level, label: String, message: String, metadata: Logger.Metadata, style: DaemonLogHandler.Style
    ) -> Bool {
        guard level == .info || level == .warning || level == .notice, let device = metadata["device"],
            let error = metadata["error"]
        else {
            return true
        }
        let text = "\(error)"
        let errorClass = text.firstIndex(of: ":").map { String(text[..<$0]) } ?? text
        let key = RepeatSuppressor.Key(
            label: label, message: message, device: "\(device)", errorClass: errorClass,
            source: metadata["source"].map { "\($0)" } ?? "")
        let stamp = WallClock.now().rfc3339
        let decision = state.withLock { state in
            state.levels[key] = (level, style)
            return state.suppressor.admit(key, at: now(), stamp: stamp)
        }
        switch decision {
        case .log: return true
        case .suppress: return false
        case .summarize(let summary):
            Self.write(summary, level: level, style: style)
            return true
        }
    }

    /// `device` works again: the summaries of its warnings not logged.
    public func flush(device: String) {
        let summaries = state.withLock { state in
            state.suppressor.flush(device: device).map { ($0, state.levels.removeValue(forKey: $0.key)) }
        }
        for (summary, how) in summaries { Self.write(summary, level: how?.0 ?? .warning, style: how?.1 ?? .current) }
    }

    /// Every pending summary (at shutdown).
    public func flushAll() {
        let summaries = state.withLock { state in
            state.suppressor.flushAll().map { ($0, state.levels.removeValue(forKey: $0.key)) }
        }
        for (summary, how) in summaries { Self.write(summary, level: how?.0 ?? .warning, style: how?.1 ?? .current) }
    }

    private static func write(_ summary: RepeatSuppressor.Summary, level: Logger.Level, style: DaemonLogHandler.Style) {
        let times = summary.repeated == 1 ? "once more" : "\(summary.repeated) times"
        DaemonLogHandler(label: summary.key.label, level: level, style: style).write(
            level: level,
            message: "\(summary.key.message) …repeated \(times) in \(summary.span.compact)",
            metadata: [
                "device": "\(summary.key.device)", "error": "\(summary.key.errorClass)", "first": "\(summary.first)",
                "last": "\(summary.last)",
            ].merging(summary.key.source.isEmpty ? [:] : ["source": "\(summary.key.source)"]) { $1 }
        )
    }
}
