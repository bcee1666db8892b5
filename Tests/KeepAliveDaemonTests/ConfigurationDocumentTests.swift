import KeepAliveTesting
import Testing

@testable import KeepAliveDaemon

/// `ConfigurationLoader.Document` counts lines in one pass over the text's scalars; this holds it to what
/// `Character.isNewline` splitting says, on texts made of every newline form (CR LF, lone CR, NEL, LS, PS, VT,
/// FF), combining marks after a newline, and plain letters.
@Suite("Configuration document: lines as Characters separate them")
struct ConfigurationDocumentTests {
    /// Where a line past the end lands: the last line, one column past its length.
    static func expected(_ text: String) -> (line: Int, column: Int) {
        var lengths = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
            .map(\.unicodeScalars.count)
        if lengths.count > 1, lengths.last == 0 { lengths.removeLast() }
        return (lengths.count, lengths[lengths.count - 1] + 1)
    }

    @Test func aLinePastTheEndLandsWhereSplittingIntoCharactersSaysOnTwoThousandTexts() {
        let pieces = [
            "a", "é", "\u{301}", "\n", "\r", "\r\n", "\u{0B}", "\u{0C}", "\u{85}", "\u{2028}", "\u{2029}", "  ",
        ]
        var generator = SeededRandomNumberGenerator(seed: 7)
        var checked = 0
        for _ in 0..<2_000 {
            let text = (0..<Int.random(in: 0...12, using: &generator))
                .map { _ in pieces[Int.random(in: 0..<pieces.count, using: &generator)] }.joined()
            let location = ConfigurationLoader.Document(file: "t.yaml", text: text).location(line: 1_000, column: 1)
            let expected = Self.expected(text)
            #expect(
                location.line == expected.line && location.column == expected.column,
                "\(text.unicodeScalars.map { String($0.value, radix: 16) })")
            checked += 1
        }
        #expect(checked == 2_000)
    }

    @Test func aLineInsideTheTextKeepsItsPlace() {
        let document = ConfigurationLoader.Document(file: "t.yaml", text: "a: 1\r\nb: 2\n")
        #expect(document.location(line: 2, column: 3) == SourceLocation(file: "t.yaml", line: 2, column: 3))
        #expect(document.location(line: 3, column: 1) == SourceLocation(file: "t.yaml", line: 2, column: 5))
        #expect(document.location(line: 0, column: 9) == SourceLocation(file: "t.yaml", line: 1, column: 1))
    }
}
