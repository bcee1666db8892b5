/// Durations as people write them, the one grammar of the configuration file, the command line and MQTT commands:
/// a decimal number and a unit, `500ms`, `30s`, `2m`, `1h`, `1.5s`.
///
/// No sign, no spaces inside, and a unit is required: a bare `30` could mean seconds or milliseconds, so it is
/// refused. White space around the text is ignored (a command typed with `echo` ends in a newline). The value is
/// exact to the nanosecond (`Double` would turn 0.1s into 99.999…ms); finer, or beyond what `Int64` nanoseconds
/// hold, is refused.
///
/// ```swift
/// DurationText.parse("1.5s")           // .milliseconds(1500)
/// DurationText.parse("30")             // nil
/// DurationText.check("25h").failure    // "25h is longer than 24h, the most allowed"
/// ```
package enum DurationText {
    /// The longest duration accepted anywhere: a keep-alive that ticks less than daily keeps nothing alive, and the
    /// bound keeps the scheduler's arithmetic (interval × power multiplier × failure backoff, in `Duration`'s
    /// 128-bit attoseconds) far from overflowing, which would trap.
    package static let longest = Duration.seconds(24 * 60 * 60)

    /// Why a text is not an acceptable duration, in words for the person who wrote it.
    package struct Problem: Error, Sendable, Hashable {
        package enum Kind: Sendable, Hashable {
            /// Not a number and a unit at all.
            case notADuration
            /// A duration, but zero (where zero is not allowed) or longer than ``DurationText/longest``.
            case outOfRange
        }

        package var kind: Kind
        package var message: String
    }

    /// The duration `text` spells, or `nil`.
    package static func parse(_ text: some StringProtocol) -> Duration? {
        if case .value(let value) = read(text) { return value }
        return nil
    }

    /// What `text` is: a duration, or why it is none.
    private enum Reading {
        case value(Duration)
        /// Not a number and a unit.
        case malformed
        /// A number and a unit, too long for `Int64` nanoseconds.
        case tooLong
        /// A number and a unit, with digits finer than a nanosecond.
        case tooFine
    }

    private static func read(_ text: some StringProtocol) -> Reading {
        let text = text.trimmingWhiteSpace()
        let units: [(suffix: String, nanoseconds: Int64)] = [
            ("ms", 1_000_000), ("s", 1_000_000_000), ("m", 60_000_000_000), ("h", 3_600_000_000_000),
        ]
        // "ms" comes first so that "500ms" is not read as 500m followed by a stray "s".
        guard let unit = units.first(where: { text.hasSuffix($0.suffix) }) else { return .malformed }
        let number = text.dropLast(unit.suffix.count)
        let parts = number.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        let whole = parts[0]
        let fraction = parts.count == 2 ? parts[1] : ""
        let isDigits = { (digits: Substring) in
            digits.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        }
        guard !whole.isEmpty, isDigits(whole), isDigits(fraction), parts.count == 1 || !fraction.isEmpty else {
            return .malformed
        }
        // The whole part alone past Int64 nanoseconds: too long, whatever the fraction.
        var wholeNanoseconds: Int64 = 0
        for digit in whole.utf8 {
            let (times10, overflowed) = wholeNanoseconds.multipliedReportingOverflow(by: 10)
            let (sum, overflowedAgain) = times10.addingReportingOverflow(Int64(digit - UInt8(ascii: "0")))
            guard !overflowed, !overflowedAgain else { return .tooLong }
            wholeNanoseconds = sum
        }
        guard !wholeNanoseconds.multipliedReportingOverflow(by: unit.nanoseconds).overflow else { return .tooLong }
        // Exact decimal arithmetic in nanoseconds; every step reports overflow instead of trapping. With the whole
        // part in range, an overflow here comes from the fraction's digits.
        var scaled: Int64 = 0
        for digit in (whole + fraction).utf8 {
            let (times10, overflowed) = scaled.multipliedReportingOverflow(by: 10)
            let (sum, overflowedAgain) = times10.addingReportingOverflow(Int64(digit - UInt8(ascii: "0")))
            guard !overflowed, !overflowedAgain else { return .tooFine }
            scaled = sum
        }
        let (product, overflowed) = scaled.multipliedReportingOverflow(by: unit.nanoseconds)
        guard !overflowed else { return .tooFine }
        var divisor: Int64 = 1
        for _ in 0..<fraction.count {
            let (next, overflowed) = divisor.multipliedReportingOverflow(by: 10)
            guard !overflowed else { return .tooFine }
            divisor = next
        }
        guard product % divisor == 0 else { return .tooFine }
        return .value(.nanoseconds(product / divisor))
    }

    /// The duration `text` spells if it is in `0...longest` (`>0` unless `allowZero`), or why not.
    package static func check(_ text: String, allowZero: Bool = false) -> Result<Duration, Problem> {
        let tooLong = Problem(
            kind: .outOfRange,
            message: "\(MessageText.shown(text)) is longer than \(longest.components.seconds / 3600)h, the most allowed"
        )
        let value: Duration
        switch read(text) {
        case .value(let read): value = read
        case .malformed: return .failure(Problem(kind: .notADuration, message: advice(text)))
        case .tooLong: return .failure(tooLong)
        case .tooFine:
            return .failure(
                Problem(kind: .notADuration, message: "\(MessageText.shown(text)) is finer than a nanosecond"))
        }
        guard allowZero || value > .zero else {
            return .failure(Problem(kind: .outOfRange, message: "must be longer than 0, e.g. 30s"))
        }
        guard value <= longest else { return .failure(tooLong) }
        return .success(value)
    }

    /// Why `text` is not a duration, with the closest correct spelling when one is obvious.
    package static func advice(_ text: String) -> String {
        let example = "a number and a unit (ms, s, m or h), e.g. 500ms, 30s, 2m, 1h"
        func shown(_ text: some StringProtocol) -> String { MessageText.shown(text) }
        let trimmed = text.filter { !$0.isWhitespace }
        if trimmed.hasPrefix("-") {
            return "`\(shown(text))` is negative: a duration is \(example)"
        }
        if Double(trimmed) != nil {
            return "a bare number is ambiguous (seconds? milliseconds?): write `\(shown(trimmed))s` or another unit, "
                + "e.g. 500ms, 30s, 2m, 1h"
        }
        let spelledOut: [(words: [String], unit: String)] = [
            (["milliseconds", "millisecond", "millis", "msec"], "ms"),
            (["seconds", "second", "secs", "sec"], "s"),
            (["minutes", "minute", "mins", "min"], "m"),
            (["hours", "hour", "hrs", "hr"], "h"),
        ]
        for (words, unit) in spelledOut {
            for word in words where trimmed.lowercased().hasSuffix(word) {
                let number = trimmed.dropLast(word.count)
                if !number.isEmpty, Double(number) != nil {
                    return "`\(shown(text))` is not a duration: write `\(shown(number))\(unit)`"
                }
            }
        }
        if parse(trimmed) != nil {
            return "`\(shown(text))` has spaces: write `\(shown(trimmed))`"
        }
        return "`\(shown(text))` is not a duration: expected \(example)"
    }
}

/// Input as error messages quote it.
package enum MessageText {
    /// At most 40 characters, control characters escaped, so that a message stays one short line whatever the
    /// file or the payload holds.
    package static func shown(_ text: some StringProtocol) -> String {
        let escaped = text.unicodeScalars.map { scalar in
            scalar.properties.generalCategory == .control ? scalar.escaped(asASCII: true) : String(scalar)
        }
        return escaped.count > 40 ? escaped.prefix(39).joined() + "…" : escaped.joined()
    }

    /// `text` with its control characters (C0, DEL, C1: an ESC sequence that would recolour or clear a terminal, a
    /// newline that would start a forged log line) written out as Swift escapes (`\u{1B}`, `\n`); the rest as it
    /// is, whatever its length.
    package static func escaped(_ text: String) -> String {
        // Almost every text has none: a byte scan. C1 controls are U+0080–U+009F, 0xC2 0x80–0x9F in UTF-8.
        guard text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == 0xC2 }) else { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            if scalar.properties.generalCategory == .control {
                result += scalar.escaped(asASCII: true)
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// An MQTT topic for a log line or an answer: whole up to 120 bytes, else its first 60 and last 40 characters
    /// around how long it was (a topic may be 65,535 bytes long, and is echoed in several places); controls
    /// escaped.
    package static func topic(_ topic: String) -> String {
        guard topic.utf8.count > 120 else { return escaped(topic) }
        return escaped(String(topic.prefix(60))) + "…(\(topic.utf8.count) bytes)…" + escaped(String(topic.suffix(40)))
    }
}

extension StringProtocol {
    /// Without the white space (blanks, newlines) at either end.
    package func trimmingWhiteSpace() -> Substring {
        let text = Substring(self)
        guard let first = text.firstIndex(where: { !$0.isWhitespace }),
            let last = text.lastIndex(where: { !$0.isWhitespace })
        else { return "" }
        return text[first...last]
    }
}
