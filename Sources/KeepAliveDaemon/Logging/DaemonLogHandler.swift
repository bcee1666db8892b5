public import Logging
import Basics

#if canImport(Glibc)
    internal import Glibc
#endif

/// swift-log to standard error, the way journald and people like it: one line per message, the level on every
/// line, `key=value` metadata, colour only on a terminal.
///
/// Under systemd (`$JOURNAL_STREAM` set) each line starts with a `<N>` syslog priority, which journald turns
/// into the entry's priority (so `journalctl -p warning` works) and drops from the text; there is no timestamp,
/// journald adds its own. Elsewhere lines start with a UTC time.
///
/// ```swift
/// LoggingSystem.bootstrap { DaemonLogHandler(label: $0, level: .info) }
/// ```
public struct DaemonLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let style: Style

    /// How lines are dressed, decided once from the environment.
    public enum Style: Sendable {
        case journal, terminal, plain

        public static var current: Style {
            let environment = ProcessEnvironment.current
            if environment["JOURNAL_STREAM"] != nil { return .journal }
            if isatty(STDERR_FILENO) == 1, environment["NO_COLOR"] == nil, environment["TERM"] != "dumb" {
                return .terminal
            }
            return .plain
        }
    }

    /// Thins warnings that repeat every tick (``RepeatedWarnings``); `nil`: every line is written.
    private let repeats: RepeatedWarnings?

    public init(label: String, level: Logger.Level = .info, style: Style = .current, repeats: RepeatedWarnings? = nil) {
        self.label = label
        self.logLevel = level
        self.style = style
        self.repeats = repeats
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        if let repeats,
            !repeats.admit(
                level: event.level, label: label, message: "\(event.message)", metadata: merged, style: style)
        {
            return
        }
        write(level: event.level, message: "\(event.message)", metadata: merged)
    }

    /// One line, as ``log(event:)`` writes it, without the repeat check (the summaries' own lines).
    func write(level: Logger.Level, message text: String, metadata merged: Logger.Metadata) {
        var line = ""
        // One entry, one line: a newline in a message would start a journal line with no priority, and an ESC
        // sequence from a configured name or a topic would reach the operator's terminal. Controls are spelled out.
        let message = MessageText.escaped(text)
        switch style {
        case .journal:
            line = "<\(Self.syslogPriority(level))>\(level) \(label): \(message)"
        case .terminal:
            line = "\(WallClock.now().rfc3339) \(Self.colour(level))\(level)\u{1B}[0m \(label): \(message)"
        case .plain:
            line = "\(WallClock.now().rfc3339) \(level) \(label): \(message)"
        }
        for key in merged.keys.sorted() {
            line += " \(key)=\(Self.quoted("\(merged[key]!)"))"
        }
        line += "\n"
        ProcessIO.write(line, to: STDERR_FILENO)
    }

    /// A metadata value: as it is, or in JSON quotes when it has a blank, a quote, `=` or a newline; control
    /// characters escaped either way (JSON's escapes inside quotes).
    private static func quoted(_ value: String) -> String {
        guard value.isEmpty || value.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" || $0.isNewline }) else {
            return MessageText.escaped(value)
        }
        var text = ""
        JSONString.append(value, to: &text)
        // JSON escapes C0; DEL and C1 are left to this.
        return MessageText.escaped(text)
    }

    private static func syslogPriority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    private static func colour(_ level: Logger.Level) -> String {
        switch level {
        case .trace, .debug: "\u{1B}[2m"
        case .info: "\u{1B}[32m"
        case .notice: "\u{1B}[36m"
        case .warning: "\u{1B}[33m"
        case .error, .critical: "\u{1B}[31m"
        }
    }
}
