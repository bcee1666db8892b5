internal import Logging
internal import Basics

/// The daemon's log flood guard (issue #15): a ``RepeatSuppressor`` behind a lock, shared by every
/// ``DaemonLogHandler`` of the process. It thins info and warning lines that carry an `error` and say what it is
/// about: a `device` (a poll that fails the same way every tick), or, for a connection's warning, which has no
/// device, the `broker` (`host:port`: a wrong password or a port without TLS, failing the same way at every retry),
/// or a `device` with a `source` (commands to it rejected: a client flooding its topics). Errors and everything
/// else are always written.
///
/// A device's summary goes out when the daemon says it works again (``flush(device:)``). A broker's goes out when a
/// line names the broker without an error (`connected to the MQTT broker`, `fleet: connected`): that line is the
/// connection working again, so its summary comes just before it, with no wiring from the bridge to the log. (That
/// line is info: under `--log-level warning` it never reaches the handler, and the summary waits for the hour or
/// the shutdown.)
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

    /// Whether to write this line; writes the summary first when one is due (or, for a line that says a broker
    /// works again, the summaries of its counted warnings).
    func admit(
        level: Logger.Level, label: String, message: String, metadata: Logger.Metadata, style: DaemonLogHandler.Style
    ) -> Bool {
        guard let error = metadata["error"] else {
            if metadata["device"] == nil, let broker = metadata["broker"] { flush(broker: "\(broker)") }
            return true
        }
        guard level == .info || level == .warning || level == .notice else { return true }
        let subject: (kind: RepeatSuppressor.Key.Subject, name: String)
        if let device = metadata["device"] {
            // A line with a `source` (a command rejected, from MQTT) is about what a sender does to the device.
            subject = (metadata["source"] == nil ? .device : .commands, "\(device)")
        } else if let broker = metadata["broker"] {
            subject = (.broker, "\(broker)")
        } else {
            return true
        }
        let key = RepeatSuppressor.Key(
            label: label, message: message, device: subject.name, errorClass: Self.errorClass("\(error)"),
            subject: subject.kind)
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

    /// An error's class, as its text starts: up to the first `:` (`connectionAborted: Connect …`) or `(` (the
    /// `MQTTError.notAuthorized(broker … refused user …)` form), so that details that change from one occurrence to
    /// the next (an address, a delay, a client id) do not make it another warning.
    package static func errorClass(_ text: String) -> String {
        text.firstIndex { $0 == ":" || $0 == "(" }.map { String(text[..<$0]) } ?? text
    }

    /// `device` works again: the summaries of its warnings not logged.
    public func flush(device: String) {
        write(state.withLock { state in Self.take(state.suppressor.flush(device: device), from: &state) })
    }

    /// A connection to `broker` (`host:port`) succeeded: the summaries of its warnings not logged.
    public func flush(broker: String) {
        write(state.withLock { state in Self.take(state.suppressor.flush(broker: broker), from: &state) })
    }

    /// Every pending summary (at shutdown).
    public func flushAll() {
        write(state.withLock { state in Self.take(state.suppressor.flushAll(), from: &state) })
    }

    /// The summaries with how their warnings were logged, forgotten from now on.
    private static func take(_ summaries: [RepeatSuppressor.Summary], from state: inout State) -> [(
        RepeatSuppressor.Summary, (Logger.Level, DaemonLogHandler.Style)?
    )] {
        summaries.map { ($0, state.levels.removeValue(forKey: $0.key)) }
    }

    private func write(_ summaries: [(RepeatSuppressor.Summary, (Logger.Level, DaemonLogHandler.Style)?)]) {
        for (summary, how) in summaries { Self.write(summary, level: how?.0 ?? .warning, style: how?.1 ?? .current) }
    }

    private static func write(_ summary: RepeatSuppressor.Summary, level: Logger.Level, style: DaemonLogHandler.Style) {
        let times = summary.repeated == 1 ? "once more" : "\(summary.repeated) times"
        DaemonLogHandler(label: summary.key.label, level: level, style: style).write(
            level: level,
            message: "\(summary.key.message) …repeated \(times) in \(summary.span.compact)",
            metadata: [
                summary.key.subject == .broker ? "broker" : "device": "\(summary.key.device)",
                "error": "\(summary.key.errorClass)", "first": "\(summary.first)", "last": "\(summary.last)",
            ].merging(summary.key.subject == .commands ? ["source": "mqtt"] : [:]) { $1 }
        )
    }
}
