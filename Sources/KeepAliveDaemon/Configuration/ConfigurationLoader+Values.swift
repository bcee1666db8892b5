internal import Basics
internal import KeepAlive
internal import Polling
internal import YAML

extension ConfigurationLoader {
    /// The largest power multiplier the file accepts, for the same overflow reason as `DurationText.longest`.
    static let largestMultiplier = 1000.0

    /// The longest value a write may carry: the ATT maximum attribute length (Core spec Vol 3 Part F 3.2.9).
    static let longestWrite = 512

    /// Parses a duration written as a decimal number and a unit (`500ms`, `30s`, `2m`, `1h`, `1.5s`): the
    /// package's one duration grammar, shared with the command line and the MQTT commands. `nil` for anything else.
    ///
    /// ```swift
    /// ConfigurationLoader.parseDuration("1.5s")  // .milliseconds(1500)
    /// ConfigurationLoader.parseDuration("30")    // nil
    /// ```
    public static func parseDuration(_ text: String) -> Duration? {
        DurationText.parse(text)
    }

    /// Parses a write value: hexadecimal bytes as `01ff`, `0x01ff`, `01:ff` or `01 ff` (one separator kind
    /// throughout, two digits per byte). Returns the bytes, or why the text is not a value.
    static func parseHexBytes(_ text: String) -> Result<[UInt8], HexValueError> {
        let forms = "\"01ff\", \"0x01ff\", \"01:ff\" or \"01 ff\""
        var digits = Substring(text)
        if digits.hasPrefix("0x") || digits.hasPrefix("0X") { digits = digits.dropFirst(2) }
        guard !digits.isEmpty else { return .failure(HexValueError("a write needs at least one byte, e.g. \"01\"")) }
        let separators = Set(digits.filter { $0 == ":" || $0 == " " })
        let groups: [Substring]
        switch separators.count {
        case 0:
            guard digits.count.isMultiple(of: 2) else {
                return .failure(HexValueError("\"\(shown(text))\" has an odd number of hex digits: two per byte"))
            }
            groups = stride(from: 0, to: digits.count, by: 2).map { offset in
                let start = digits.index(digits.startIndex, offsetBy: offset)
                return digits[start..<digits.index(start, offsetBy: 2)]
            }
        case 1:
            groups = digits.split(separator: separators.first ?? ":", omittingEmptySubsequences: false)
        default:
            return .failure(HexValueError("\"\(shown(text))\" mixes separators: use `:` or spaces, not both"))
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(groups.count)
        for group in groups {
            // Digit by digit (Hex): `UInt8(_:radix:)` would take a sign ("+f", "-0").
            guard group.utf8.count == 2, let byte = Hex.bytes(group)?.first else {
                return .failure(HexValueError("\"\(shown(text))\" is not hex bytes: expected \(forms)"))
            }
            bytes.append(byte)
        }
        guard bytes.count <= longestWrite else {
            return .failure(HexValueError("\(bytes.count) bytes: an attribute holds at most \(longestWrite)"))
        }
        return .success(bytes)
    }

    /// Why a write value is not hexadecimal bytes.
    struct HexValueError: Error {
        var message: String
        init(_ message: String) { self.message = message }
    }

    /// Input as messages quote it (``MessageText/shown(_:)``).
    static func shown(_ text: some StringProtocol) -> String {
        MessageText.shown(text)
    }

    /// The edit distance (insertions, deletions, substitutions) between two keys, for "did you mean" hints.
    static func editDistance(_ lhs: String, _ rhs: String) -> Int {
        let lhs = Array(lhs.lowercased().unicodeScalars)
        let rhs = Array(rhs.lowercased().unicodeScalars)
        guard !lhs.isEmpty else { return rhs.count }
        guard !rhs.isEmpty else { return lhs.count }
        var previous = Array(0...rhs.count)
        var current = [Int](repeating: 0, count: rhs.count + 1)
        for (row, left) in lhs.enumerated() {
            current[0] = row + 1
            for (column, right) in rhs.enumerated() {
                current[column + 1] = Swift.min(
                    previous[column + 1] + 1,
                    current[column] + 1,
                    previous[column] + (left == right ? 0 : 1)
                )
            }
            swap(&previous, &current)
        }
        return previous[rhs.count]
    }
}

// MARK: - Where things are

extension ConfigurationLoader {
    /// One text being parsed: its name for locations, and its line lengths to keep every location inside it.
    struct Document {
        let file: String
        /// The text's lines, as `Character.isNewline` separates them (CR LF is one separator).
        private let lineCount: Int
        /// The last line's length in Unicode scalars, as libyaml counts columns.
        private let lastLineLength: Int

        /// One pass over the scalars: a configuration is parsed once, but the loader's fuzzing parses 100,000
        /// (splitting into `Character`s with a key path cost 44 % of that in a debug build).
        init(file: String, text: String) {
            self.file = file
            var lines = 1
            var length = 0
            var previousLength = 0
            var afterCarriageReturn = false
            for scalar in text.unicodeScalars {
                // A newline scalar always ends its grapheme, so scalars separate lines as Characters do.
                if scalar == "\n" && afterCarriageReturn {
                    afterCarriageReturn = false
                    continue
                }
                afterCarriageReturn = scalar == "\r"
                switch scalar {
                case "\n", "\u{0B}", "\u{0C}", "\r", "\u{85}", "\u{2028}", "\u{2029}":
                    lines += 1
                    previousLength = length
                    length = 0
                default:
                    length += 1
                }
            }
            // A final newline ends the last line rather than starting an empty one.
            if lines > 1, length == 0 {
                lines -= 1
                length = previousLength
            }
            lineCount = lines
            lastLineLength = length
        }

        var start: SourceLocation { SourceLocation(file: file, line: 1, column: 1) }

        /// The YAML document's root node (nil for an empty text), a syntax error at libyaml's position.
        func root(_ text: String) throws(ConfigurationError) -> YAMLNode? {
            do {
                return try YAMLDocument.root(of: text)
            } catch {
                throw syntaxError(error)
            }
        }

        /// A 1-based position (`YAMLMark`s already are), moved back inside the text: libyaml reports "unexpected
        /// end of stream" one line past a final newline.
        func location(line: Int, column: Int) -> SourceLocation {
            guard line >= 1 else { return start }
            if line > lineCount {
                return SourceLocation(file: file, line: lineCount, column: lastLineLength + 1)
            }
            return SourceLocation(file: file, line: line, column: Swift.max(1, column))
        }

        func location(_ node: YAMLNode) -> SourceLocation {
            location(line: node.mark.line, column: node.mark.column)
        }

        func error(
            _ kind: ConfigurationError.Kind, at node: YAMLNode, _ field: String, _ message: String
        ) -> ConfigurationError {
            ConfigurationError(kind, at: location(node), field: field, message)
        }

        /// A YAML error as a `.syntax` error at libyaml's position, with libyaml's words.
        func syntaxError(_ error: YAMLError) -> ConfigurationError {
            let at = location(line: error.mark.line, column: error.mark.column)
            if error.stage == .duplicateKeys {
                let keys = error.duplicateKeys.map { "`\(shown($0))`" }.joined(separator: ", ")
                return ConfigurationError(
                    .syntax, at: at, field: "",
                    "duplicate key \(keys) in one mapping (first used here): a key may appear only once"
                )
            }
            return ConfigurationError(.syntax, at: at, field: "", "YAML: \(error)")
        }
    }

    /// The pairs of one mapping, in file order, every key checked against the format's.
    struct Fields {
        /// The mapping, where missing keys are reported.
        let node: YAMLNode
        /// The mapping's own field path: `""` at the top, `devices[1]`, `low_power`.
        let path: String
        let pairs: [(key: String, value: YAMLNode)]
        private let document: Document

        init(
            _ node: YAMLNode, path: String, allowed: [String], in document: Document, expected: String
        ) throws(ConfigurationError) {
            guard case .mapping(let mapping) = node else {
                throw document.wrongType(node, path, expected: expected)
            }
            self.node = node
            self.path = path
            self.document = document
            var pairs: [(key: String, value: YAMLNode)] = []
            for (keyNode, value) in mapping {
                let key = try Self.name(of: keyNode, path: path, allowed: allowed, in: document)
                // The YAML reader refuses duplicate keys already, unless they differ only in tag (`1` and `"1"`).
                guard !pairs.contains(where: { $0.key == key }) else {
                    throw document.error(
                        .syntax, at: keyNode, Self.join(path, key),
                        "duplicate key `\(shown(key))`: a key may appear only once"
                    )
                }
                pairs.append((key, value))
            }
            self.pairs = pairs
        }

        /// A key's name, when the format knows it.
        private static func name(
            of keyNode: YAMLNode, path: String, allowed: [String], in document: Document
        ) throws(ConfigurationError) -> String {
            let place = path.isEmpty ? "at the top level" : "in `\(path)`"
            if keyNode.tag == YAMLTag.merge {
                throw document.error(
                    .unknownKey, at: keyNode, Self.join(path, "<<"),
                    "merge keys (`<<`) are not supported: repeat the settings, or share a whole list with an anchor "
                        + "(`read: &reads [2a19]`, then `read: *reads`)"
                )
            }
            guard case .scalar(let scalar) = keyNode, keyNode.tag != YAMLTag.null else {
                throw document.error(
                    .unknownKey, at: keyNode, path,
                    "a key \(place) must be a name like `\(allowed[0])`, found \(document.describe(keyNode))"
                )
            }
            let key = scalar.string
            guard allowed.contains(key) else {
                let closest = allowed.map { ($0, ConfigurationLoader.editDistance(key, $0)) }.min { $0.1 < $1.1 }
                let hint =
                    if let closest, closest.1 <= 2 {
                        "did you mean `\(closest.0)`?"
                    } else {
                        "known keys: " + allowed.joined(separator: ", ")
                    }
                throw document.error(
                    .unknownKey, at: keyNode, Self.join(path, key), "unknown key `\(shown(key))` \(place); \(hint)"
                )
            }
            return key
        }

        static func join(_ path: String, _ key: String) -> String {
            path.isEmpty ? key : "\(path).\(key)"
        }

        /// The field path of one of this mapping's keys.
        func field(_ key: String) -> String { Self.join(path, key) }

        subscript(key: String) -> YAMLNode? {
            pairs.first { $0.key == key }?.value
        }

        func required(_ key: String) throws(ConfigurationError) -> YAMLNode {
            guard let value = self[key] else {
                let place = path.isEmpty ? "the file" : "`\(path)`"
                throw document.error(.missingKey, at: node, field(key), "\(place) needs `\(key):`")
            }
            return value
        }
    }
}

// MARK: - Typed values out of nodes

extension ConfigurationLoader.Document {
    /// What a node is, for "found …" in messages: "a sequence", "the number 30", "an empty value".
    func describe(_ node: YAMLNode) -> String {
        switch node {
        case .mapping: return "a mapping"
        case .sequence: return "a sequence"
        case .scalar(let scalar):
            let text = shown(scalar.string)
            switch node.tag {
            case YAMLTag.null: return scalar.string.isEmpty ? "an empty value" : "null (`\(text)`)"
            case YAMLTag.bool: return "the boolean `\(text)`"
            case YAMLTag.int, YAMLTag.float: return "the number `\(text)`"
            case YAMLTag.str: return "the string \"\(text)\""
            case YAMLTag.timestamp: return "the date `\(text)`"
            case let tag:
                // `!!binary` rather than `tag:yaml.org,2002:binary`, as the file spells it.
                let spelled = tag.description
                return "a value tagged `\(shown(spelled))`"
            }
        }
    }

    func wrongType(_ node: YAMLNode, _ field: String, expected: String) -> ConfigurationError {
        error(.wrongType, at: node, field, "expected \(expected), found \(describe(node))")
    }

    /// A scalar's text, as written. Plain numbers, booleans and dates are taken as their text (a UUID `2902` or a
    /// value `01` is read by YAML as a number), so only empty values, collections and unknown tags are refused.
    func text(_ node: YAMLNode, _ field: String, expected: String) throws(ConfigurationError) -> String {
        guard case .scalar(let scalar) = node else { throw wrongType(node, field, expected: expected) }
        let textTags: Set<YAMLTag> = [
            YAMLTag.str, YAMLTag.int, YAMLTag.float, YAMLTag.bool,
            YAMLTag.timestamp,
        ]
        guard textTags.contains(node.tag) else { throw wrongType(node, field, expected: expected) }
        return scalar.string
    }

    /// A non-empty scalar text.
    func nonEmptyText(_ node: YAMLNode, _ field: String, expected: String) throws(ConfigurationError) -> String {
        let value = try text(node, field, expected: expected)
        guard !value.isEmpty else {
            throw error(.invalidValue, at: node, field, "must not be empty: expected \(expected)")
        }
        return value
    }

    func sequence(_ node: YAMLNode, _ field: String, expected: String) throws(ConfigurationError) -> [YAMLNode] {
        guard case .sequence(let sequence) = node else { throw wrongType(node, field, expected: expected) }
        return Array(sequence)
    }

    /// A duration in `0...DurationText.longest`, or in `>0...` unless `allowZero`.
    func duration(_ node: YAMLNode, _ field: String, allowZero: Bool = false) throws(ConfigurationError) -> Duration {
        let written = try text(node, field, expected: "a duration like 30s")
        switch DurationText.check(written, allowZero: allowZero) {
        case .success(let value):
            return value
        case .failure(let problem):
            throw error(problem.kind == .notADuration ? .badDuration : .invalidValue, at: node, field, problem.message)
        }
    }

    /// A YAML number (not a quoted string) between `range`'s bounds.
    func number(_ node: YAMLNode, _ field: String, in range: ClosedRange<Double>) throws(ConfigurationError) -> Double {
        let expected = "a number from \(Self.formatBound(range.lowerBound)) to \(Self.formatBound(range.upperBound))"
        guard case .scalar(let scalar) = node,
            [YAMLTag.int, YAMLTag.float].contains(node.tag)
        else { throw wrongType(node, field, expected: expected) }
        // YAML allows `1_000`; `Double` does not. `.inf` and `.nan` fail here or at `isFinite`.
        guard let value = Double(scalar.string.filter { $0 != "_" }), value.isFinite else {
            throw error(.invalidValue, at: node, field, "`\(shown(scalar.string))` is not a plain number: \(expected)")
        }
        guard range.contains(value) else {
            throw error(.invalidValue, at: node, field, "\(shown(scalar.string)) is out of range: \(expected)")
        }
        return value
    }

    /// A YAML whole number between `range`'s bounds.
    func integer(_ node: YAMLNode, _ field: String, in range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        let expected = "a whole number from \(range.lowerBound) to \(range.upperBound)"
        guard case .scalar(let scalar) = node,
            [YAMLTag.int, YAMLTag.float].contains(node.tag)
        else { throw wrongType(node, field, expected: expected) }
        // `Int(_:)` returns nil on overflow, so a 40-digit number is merely out of range.
        guard let value = Int(scalar.string), range.contains(value) else {
            throw error(.invalidValue, at: node, field, "\(shown(scalar.string)) is not \(expected)")
        }
        return value
    }

    func uuid(_ node: YAMLNode, _ field: String) throws(ConfigurationError) -> BluetoothUUID {
        let expected = "a UUID like 2a19 or 4b410002-6b65-6570-616c-697665000000"
        let written = try text(node, field, expected: expected)
        do {
            return try BluetoothUUID(written)
        } catch let parseError as BluetoothUUID.ParseError {
            throw error(.badUUID, at: node, field, "\"\(shown(written))\" is not a UUID: \(parseError.reason)")
        } catch {
            // `BluetoothUUID.init` throws only `ParseError`; this keeps the typed throw total.
            throw self.error(.badUUID, at: node, field, "\"\(shown(written))\" is not \(expected)")
        }
    }

    /// An address checked by libbluetooth's `bachk`, upper-cased.
    func address(_ node: YAMLNode, _ field: String) throws(ConfigurationError) -> String {
        let written = try text(node, field, expected: "an address like C0:FF:EE:00:00:01")
        guard HostBluetooth.isValidAddress(written) else {
            let octets = written.split(separator: ":", omittingEmptySubsequences: false).count
            let detail = octets != 6 && written.contains(":") ? " (it has \(octets) parts, an address has 6)" : ""
            throw error(
                .badAddress, at: node, field,
                "\"\(shown(written))\" is not a Bluetooth address\(detail): "
                    + "expected six hex octets like C0:FF:EE:00:00:01"
            )
        }
        return written.uppercased()
    }

    /// An adapter name `hciN`, as BlueZ names them under `/org/bluez`.
    func adapter(_ node: YAMLNode, _ field: String) throws(ConfigurationError) -> String {
        let written = try text(node, field, expected: "an adapter name like hci0")
        guard HostBluetooth.isValidAdapter(written) else {
            throw error(.invalidValue, at: node, field, "\"\(shown(written))\" is not an adapter name like hci0")
        }
        return written
    }

    func hexBytes(_ node: YAMLNode, _ field: String) throws(ConfigurationError) -> [UInt8] {
        let written = try text(node, field, expected: "hex bytes like \"01ff\"")
        switch ConfigurationLoader.parseHexBytes(written) {
        case .success(let bytes): return bytes
        case .failure(let problem): throw error(.invalidValue, at: node, field, problem.message)
        }
    }

    /// `1` rather than `1.0`; only ever given the loader's small constant bounds.
    private static func formatBound(_ value: Double) -> String {
        value == value.rounded() && value.magnitude < 1e15 ? String(Int(value)) : String(value)
    }

    private func shown(_ text: some StringProtocol) -> String {
        ConfigurationLoader.shown(text)
    }
}
