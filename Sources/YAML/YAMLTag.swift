/// A node's tag, by its full name (`tag:yaml.org,2002:int`), and the YAML 1.1 rules that give a plain scalar
/// its tag when the file writes none.
package struct YAMLTag: Sendable, Hashable, CustomStringConvertible {
    package let name: String

    package init(_ name: String) {
        self.name = name
    }

    package static let str = YAMLTag("tag:yaml.org,2002:str")
    package static let int = YAMLTag("tag:yaml.org,2002:int")
    package static let float = YAMLTag("tag:yaml.org,2002:float")
    package static let bool = YAMLTag("tag:yaml.org,2002:bool")
    package static let null = YAMLTag("tag:yaml.org,2002:null")
    package static let timestamp = YAMLTag("tag:yaml.org,2002:timestamp")
    package static let merge = YAMLTag("tag:yaml.org,2002:merge")
    package static let value = YAMLTag("tag:yaml.org,2002:value")
    package static let map = YAMLTag("tag:yaml.org,2002:map")
    package static let seq = YAMLTag("tag:yaml.org,2002:seq")

    /// As a file spells it: `!!binary` for the YAML namespace, the name itself otherwise.
    package var description: String {
        let yamlPrefix = "tag:yaml.org,2002:"
        return name.hasPrefix(yamlPrefix) ? "!!" + name.dropFirst(yamlPrefix.count) : name
    }

    /// The tag of a plain (unquoted, untagged) scalar: the first of bool, int, float, merge, null, timestamp and
    /// value whose YAML 1.1 pattern (yaml.org/type) matches the whole text, else str. So `yes` is a bool, `0x1f`
    /// and `1_000` are ints, `1.5e3` and `.inf` floats, `~` and the empty text null, `2024-05-01` a timestamp.
    package static func resolve(plain text: String) -> YAMLTag {
        // Most plain scalars of a configuration are names, addresses, UUIDs and durations: a first character no
        // pattern starts with settles them at once.
        guard let first = text.utf8.first else { return .null }
        if !PlainScalarRules.mayStartATag(first) { return .str }
        var text = text
        return text.withUTF8 { text in
            if PlainScalarRules.isBool(text) { return .bool }
            if PlainScalarRules.isInt(text) { return .int }
            if PlainScalarRules.isFloat(text) { return .float }
            if text.elementsEqual("<<".utf8) { return .merge }
            if PlainScalarRules.isNull(text) { return .null }
            if PlainScalarRules.isTimestamp(text) { return .timestamp }
            if text.elementsEqual("=".utf8) { return .value }
            return .str
        }
    }
}

/// The YAML 1.1 implicit-type patterns, matched by hand over UTF-8 (no regular-expression engine, which on Linux
/// means Foundation and ICU loaded into the daemon).
enum PlainScalarRules {
    typealias Text = UnsafeBufferPointer<UInt8>

    /// Whether any pattern can match a text beginning with `byte`: the bools' and nulls' first letters, `~`,
    /// digits, signs, `.` (floats), `<` (merge) and `=` (value).
    static func mayStartATag(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."),
            UInt8(ascii: "~"), UInt8(ascii: "<"), UInt8(ascii: "="),
            UInt8(ascii: "y"), UInt8(ascii: "Y"), UInt8(ascii: "n"), UInt8(ascii: "N"), UInt8(ascii: "t"),
            UInt8(ascii: "T"), UInt8(ascii: "f"), UInt8(ascii: "F"), UInt8(ascii: "o"), UInt8(ascii: "O"):
            return true
        default:
            return false
        }
    }

    private static let boolWords: Set<String> = [
        "yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON",
        "off", "Off", "OFF",
    ]
    private static let nullWords: Set<String> = ["", "~", "null", "Null", "NULL"]

    static func isBool(_ text: Text) -> Bool {
        text.count <= 5 && boolWords.contains(String(decoding: text, as: UTF8.self))
    }

    static func isNull(_ text: Text) -> Bool {
        text.count <= 4 && nullWords.contains(String(decoding: text, as: UTF8.self))
    }

    /// `[-+]?` then one of: `0b[01_]+`, `0o?[0-7_]+`, `0`, `[1-9][0-9_]*`, `0x[0-9a-fA-F_]+`, or the
    /// sexagesimal `[1-9][0-9_]*(:[0-5]?[0-9])+`.
    static func isInt(_ text: Text) -> Bool {
        var cursor = Cursor(text)
        cursor.skipSign()
        let body = cursor
        if cursor.take("0"), cursor.take("b"),
            cursor.takeOneOrMore(where: { $0 == ascii("0") || $0 == ascii("1") || $0 == ascii("_") }), cursor.atEnd
        {
            return true
        }
        cursor = body
        if cursor.take("0") {
            _ = cursor.take("o")
            if cursor.takeOneOrMore(where: { (ascii("0")...ascii("7")).contains($0) || $0 == ascii("_") }), cursor.atEnd
            {
                return true
            }
        }
        cursor = body
        if cursor.take("0"), cursor.atEnd { return true }
        cursor = body
        if cursor.take("0"), cursor.take("x"), cursor.takeOneOrMore(where: isHexDigitOrUnderscore), cursor.atEnd {
            return true
        }
        cursor = body
        if cursor.takeOne(where: { (ascii("1")...ascii("9")).contains($0) }) {
            cursor.takeZeroOrMore(where: isDigitOrUnderscore)
            if cursor.atEnd { return true }
            return cursor.takeSexagesimalGroups() && cursor.atEnd
        }
        return false
    }

    /// One of: `[-+]?[0-9][0-9_]*(\.[0-9_]*)?([eE][-+]?[0-9]+)?`, `\.[0-9_]+([eE][-+][0-9]+)?`,
    /// `[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*`, `[-+]?\.(inf|Inf|INF)`, `\.(nan|NaN|NAN)`.
    static func isFloat(_ text: Text) -> Bool {
        var cursor = Cursor(text)
        if cursor.take("."), ["nan", "NaN", "NAN"].contains(cursor.restText) { return true }
        cursor = Cursor(text)
        if cursor.take("."), cursor.takeOneOrMore(where: isDigitOrUnderscore) {
            if cursor.atEnd { return true }
            return cursor.takeOneOf("eE") && cursor.takeOneOf("-+") && cursor.takeOneOrMore(where: isDigit)
                && cursor.atEnd
        }
        cursor = Cursor(text)
        cursor.skipSign()
        let body = cursor
        if cursor.take("."), ["inf", "Inf", "INF"].contains(cursor.restText) { return true }
        cursor = body
        guard cursor.takeOne(where: isDigit) else { return false }
        cursor.takeZeroOrMore(where: isDigitOrUnderscore)
        let integerPart = cursor
        // The decimal form.
        if cursor.take(".") { cursor.takeZeroOrMore(where: isDigitOrUnderscore) }
        if cursor.takeOneOf("eE") {
            _ = cursor.takeOneOf("-+")
            if cursor.takeOneOrMore(where: isDigit), cursor.atEnd { return true }
        } else if cursor.atEnd {
            return true
        }
        // The sexagesimal form.
        cursor = integerPart
        guard cursor.takeSexagesimalGroups(), cursor.take(".") else { return false }
        cursor.takeZeroOrMore(where: isDigitOrUnderscore)
        return cursor.atEnd
    }

    /// `YYYY-MM-DD`, or `YYYY-M-D` followed by `T`/`t`/blanks, `h:MM:SS`, an optional fraction and an optional
    /// zone (`Z`, `+h`, `-hh:MM`), blanks allowed before the zone.
    static func isTimestamp(_ text: Text) -> Bool {
        var cursor = Cursor(text)
        guard cursor.takeDigits(4...4), cursor.take("-") else { return false }
        let afterYear = cursor
        if cursor.takeDigits(2...2), cursor.take("-"), cursor.takeDigits(2...2), cursor.atEnd { return true }
        cursor = afterYear
        guard cursor.takeDigits(1...2), cursor.take("-"), cursor.takeDigits(1...2) else { return false }
        if !cursor.takeOneOf("Tt") {
            guard cursor.takeOneOrMore(where: isBlank) else { return false }
        }
        guard cursor.takeDigits(1...2), cursor.take(":"), cursor.takeDigits(2...2), cursor.take(":"),
            cursor.takeDigits(2...2)
        else { return false }
        if cursor.take(".") { cursor.takeZeroOrMore(where: isDigit) }
        if cursor.atEnd { return true }
        cursor.takeZeroOrMore(where: isBlank)
        if cursor.take("Z") { return cursor.atEnd }
        guard cursor.takeOneOf("-+"), cursor.takeDigits(1...2) else { return false }
        if cursor.take(":") { guard cursor.takeDigits(2...2) else { return false } }
        return cursor.atEnd
    }

    static func ascii(_ character: Unicode.Scalar) -> UInt8 { UInt8(character.value) }
    static func isDigit(_ byte: UInt8) -> Bool { (ascii("0")...ascii("9")).contains(byte) }
    static func isDigitOrUnderscore(_ byte: UInt8) -> Bool { isDigit(byte) || byte == ascii("_") }
    static func isBlank(_ byte: UInt8) -> Bool { byte == ascii(" ") || byte == ascii("\t") }
    static func isHexDigitOrUnderscore(_ byte: UInt8) -> Bool {
        isDigitOrUnderscore(byte) || (ascii("a")...ascii("f")).contains(byte)
            || (ascii("A")...ascii("F")).contains(byte)
    }

    /// A position in the text; each `take` moves past what it matched and says whether it did.
    struct Cursor {
        let text: Text
        var index = 0

        init(_ text: Text) { self.text = text }

        var atEnd: Bool { index == text.count }
        var restText: String { String(decoding: text[index...], as: UTF8.self) }

        mutating func take(_ character: Unicode.Scalar) -> Bool {
            takeOne { $0 == ascii(character) }
        }

        mutating func takeOneOf(_ characters: String) -> Bool {
            takeOne { byte in characters.utf8.contains(byte) }
        }

        mutating func takeOne(where matches: (UInt8) -> Bool) -> Bool {
            guard index < text.count, matches(text[index]) else { return false }
            index += 1
            return true
        }

        mutating func takeZeroOrMore(where matches: (UInt8) -> Bool) {
            while index < text.count, matches(text[index]) { index += 1 }
        }

        mutating func takeOneOrMore(where matches: (UInt8) -> Bool) -> Bool {
            guard takeOne(where: matches) else { return false }
            takeZeroOrMore(where: matches)
            return true
        }

        mutating func takeDigits(_ count: ClosedRange<Int>) -> Bool {
            var taken = 0
            while taken < count.upperBound, takeOne(where: isDigit) { taken += 1 }
            return count.contains(taken)
        }

        mutating func skipSign() {
            _ = takeOneOf("-+")
        }

        /// `(:[0-5]?[0-9])+`.
        mutating func takeSexagesimalGroups() -> Bool {
            var groups = 0
            while true {
                let before = self
                guard take(":") else { break }
                let sixty = self
                if takeOne(where: { (ascii("0")...ascii("5")).contains($0) }), takeOne(where: isDigit) {
                    groups += 1
                    continue
                }
                self = sixty
                guard takeOne(where: isDigit) else {
                    self = before
                    break
                }
                groups += 1
            }
            return groups > 0
        }
    }
}
