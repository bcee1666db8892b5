/// Keeps a warning that repeats (the same message and error class on the same device, every tick, or about the same
/// broker, every retry) from flooding the log: the first one is logged, the repeats within `window` are counted,
/// and a summary line (`…repeated 118 times in 1h`, with the first and last occurrence) goes out when the window
/// has passed and the warning comes again, when the device (the broker) works again, or at shutdown. Pure: instants
/// and stamps come in. The records keep every failure; only the log is thinned.
///
/// ```swift
/// var repeats = RepeatSuppressor(window: .seconds(3_600))
/// switch repeats.admit(key, at: now, stamp: wallClockText) { case .log: …; case .suppress: break; case .summarize(let
/// s): … }
/// ```
public struct RepeatSuppressor: Sendable {
    /// What makes two warnings "the same".
    public struct Key: Sendable, Hashable {
        public var label: String
        public var message: String
        /// What the warning is about: a device's name, or a broker's `host:port` (``subject`` says which).
        public var device: String
        /// The error's class: its code (`connectionAborted`), not its text, which may carry changing details.
        public var errorClass: String
        /// Whether ``device`` names a device, a broker, or a device's commands: the summary names it the same way,
        /// and a device that works again ends the counting of its own polls' warnings only.
        public var subject: Subject

        /// What a warning can be about.
        public enum Subject: String, Sendable, Hashable {
            /// A configured device (a poll failing every tick).
            case device
            /// An MQTT broker (a connection failing every retry), by `host:port`.
            case broker
            /// The commands sent to a device over MQTT (a client flooding its topics with bad ones), by the
            /// device's name: the sender is the trouble, so the device polling well does not end the counting.
            case commands
        }

        public init(label: String, message: String, device: String, errorClass: String, subject: Subject = .device) {
            self.label = label
            self.message = message
            self.device = device
            self.errorClass = errorClass
            self.subject = subject
        }
    }

    /// Repeats not logged, to be said in one line.
    public struct Summary: Sendable, Hashable {
        public var key: Key
        /// Occurrences not logged.
        public var repeated: Int
        /// Over how long (from the first occurrence of this window to the last).
        public var span: Duration
        /// The caller's stamps (wall-clock text) of the first occurrence in this window and of the last.
        public var first: String
        public var last: String

        public init(key: Key, repeated: Int, span: Duration, first: String, last: String) {
            self.key = key
            self.repeated = repeated
            self.span = span
            self.first = first
            self.last = last
        }
    }

    public enum Decision: Sendable, Hashable {
        /// Log it (the first of its kind, or the first after a summary).
        case log
        /// Count it, do not log it.
        case suppress
        /// Log the summary, then this one (a new window starts with it).
        case summarize(Summary)
    }

    private struct Entry: Sendable {
        var windowStart: Duration
        var first: String
        var firstAt: Duration
        var last: String
        var lastAt: Duration
        var repeated = 0
    }

    public let window: Duration
    private var entries: [Key: Entry] = [:]

    public init(window: Duration = .seconds(3_600)) {
        self.window = window
    }

    /// How many kinds of warning are being counted.
    public var tracked: Int { entries.count }

    /// One warning at `now` (a monotonic instant), stamped `stamp` for the summary.
    public mutating func admit(_ key: Key, at now: Duration, stamp: String) -> Decision {
        guard var entry = entries[key] else {
            entries[key] = Entry(windowStart: now, first: stamp, firstAt: now, last: stamp, lastAt: now)
            return .log
        }
        if now - entry.windowStart < window {
            entry.repeated += 1
            entry.last = stamp
            entry.lastAt = now
            entries[key] = entry
            return .suppress
        }
        let summary = entry.repeated > 0 ? Self.summary(key, entry) : nil
        entries[key] = Entry(windowStart: now, first: stamp, firstAt: now, last: stamp, lastAt: now)
        return summary.map { .summarize($0) } ?? .log
    }

    /// Ends the counting for `device` (it works again): the summaries of what was not logged about its polls
    /// (not about its commands).
    public mutating func flush(device: String) -> [Summary] {
        flush(entries.keys.filter { $0.subject == .device && $0.device == device })
    }

    /// Ends the counting for `broker` (`host:port`; a connection to it succeeded): the summaries of what was not
    /// logged.
    public mutating func flush(broker: String) -> [Summary] {
        flush(entries.keys.filter { $0.subject == .broker && $0.device == broker })
    }

    /// Ends all counting (shutdown).
    public mutating func flushAll() -> [Summary] {
        flush(Array(entries.keys))
    }

    private mutating func flush(_ keys: [Key]) -> [Summary] {
        var summaries: [Summary] = []
        for key in keys.sorted(by: { ($0.device, $0.message, $0.errorClass) < ($1.device, $1.message, $1.errorClass) })
        {
            if let entry = entries.removeValue(forKey: key), entry.repeated > 0 {
                summaries.append(Self.summary(key, entry))
            }
        }
        return summaries
    }

    private static func summary(_ key: Key, _ entry: Entry) -> Summary {
        Summary(
            key: key, repeated: entry.repeated, span: entry.lastAt - entry.firstAt, first: entry.first, last: entry.last
        )
    }
}
