/// Durations as people type them in a command: `500ms`, `30s`, `1.5s`, `2m`, `1h`.
///
/// Accepted: a positive decimal number (at most 3 fraction digits) followed by `ms`, `s`, `m` or `h`, with no
/// spaces inside; surrounding white space is ignored. Anything else is `nil`, so a malformed command is
/// answered rather than guessed at.
enum DurationText {
    static func parse(_ text: String) -> Duration? {
        let trimmed = text.trimmingWhiteSpace()
        let unitStart = trimmed.firstIndex { !($0.isASCII && ($0.isNumber || $0 == ".")) } ?? trimmed.endIndex
        let number = trimmed[..<unitStart]
        let unit = trimmed[unitStart...]
        let perUnit: Int64
        switch unit {
        case "ms": perUnit = 1
        case "s": perUnit = 1_000
        case "m": perUnit = 60_000
        case "h": perUnit = 3_600_000
        default: return nil
        }
        let parts = number.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= 2, let whole = parts.first, !whole.isEmpty, whole.count <= 9, let wholeValue = Int64(whole)
        else { return nil }
        var thousandths: Int64 = 0
        if parts.count == 2 {
            let fraction = parts[1]
            guard !fraction.isEmpty, fraction.count <= 3, let value = Int64(fraction) else { return nil }
            thousandths = value * [1, 100, 10, 1][fraction.count]
        }
        // Milliseconds × 1000 → microseconds, so `1.5ms` is still exact.
        let micros = (wholeValue * 1_000 + thousandths) * perUnit
        guard micros > 0 else { return nil }
        return .microseconds(micros)
    }
}

extension StringProtocol {
    /// Without the white space (blanks, newlines) at either end; the doctor's probes use it too.
    package func trimmingWhiteSpace() -> Substring {
        let text = Substring(self)
        guard let first = text.firstIndex(where: { !$0.isWhitespace }),
            let last = text.lastIndex(where: { !$0.isWhitespace })
        else { return "" }
        return text[first...last]
    }
}
