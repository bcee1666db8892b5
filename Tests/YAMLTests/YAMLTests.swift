import Testing
import YAML

@Suite("YAML 1.1 implicit tags of plain scalars")
struct PlainScalarTagTests {
    @Test(arguments: [
        // bool
        ("yes", YAMLTag.bool), ("No", .bool), ("TRUE", .bool), ("off", .bool), ("On", .bool), ("yEs", .str),
        // int: decimal, octal, binary, hex, sexagesimal, underscores, signs
        ("0", .int), ("30", .int), ("-7", .int), ("+1_000", .int), ("0b1010", .int), ("017", .int), ("0o17", .int),
        ("0x1F", .int), ("0x_ff", .int), ("190:20:30", .int), ("2a19", .str), ("0x", .str), ("0b", .str),
        ("08", .float), ("1:60", .str), ("1:7", .int),
        // float
        ("1.5", .float), ("-0.5", .float), ("1.", .float), ("1e3", .float), ("1.5e-3", .float), (".5", .float),
        (".5e+3", .float), (".5e3", .str), ("-.inf", .float), (".Inf", .float), (".NaN", .float), ("-.nan", .str),
        ("190:20:30.15", .float), ("1.2.3", .str), ("e3", .str),
        // merge, null, value
        ("<<", .merge), ("~", .null), ("", .null), ("null", .null), ("NULL", .null), ("nUll", .str), ("=", .value),
        // timestamp
        ("2024-05-01", .timestamp), ("2001-12-14t21:59:43.10-05:00", .timestamp),
        ("2001-12-14 21:59:43.10 -5", .timestamp), ("2001-12-15T02:59:43.1Z", .timestamp),
        ("2001-12-14 21:59:43", .timestamp), ("2001-1-2", .str), ("2001-12-14x21:59:43", .str),
        // strings the configuration meets
        ("30s", .str), ("C0:FF:EE:00:00:01", .str), ("sint16le", .str), ("hci0", .str), ("1.5s", .str),
    ])
    func resolvesLikeYAML11(_ text: String, _ tag: YAMLTag) {
        #expect(YAMLTag.resolve(plain: text) == tag, "\(text)")
    }
}

@Suite("YAML documents composed from libyaml's events")
struct YAMLDocumentTests {
    func root(_ text: String) throws -> YAMLNode {
        try #require(try YAMLDocument.root(of: text))
    }

    struct UnexpectedNode: Error, CustomStringConvertible {
        var node: YAMLNode
        var description: String { "unexpected node: \(node)" }
    }

    func mapping(_ node: YAMLNode) throws -> YAMLMapping {
        guard case .mapping(let mapping) = node else { throw UnexpectedNode(node: node) }
        return mapping
    }

    func sequence(_ node: YAMLNode) throws -> YAMLSequence {
        guard case .sequence(let sequence) = node else { throw UnexpectedNode(node: node) }
        return sequence
    }

    func scalar(_ node: YAMLNode) throws -> YAMLScalar {
        guard case .scalar(let scalar) = node else { throw UnexpectedNode(node: node) }
        return scalar
    }

    func failure(_ text: String) -> YAMLError? {
        do {
            _ = try YAMLDocument.root(of: text)
            return nil
        } catch {
            return error
        }
    }

    @Test func mappingsKeepFileOrderPositionsAndTags() throws {
        let node = try root("interval: 30s\ndevices:\n  - {name: a, at: 0, scale: 0.5, on: yes, n: ~, q: \"3\"}\n")
        let mapping = try mapping(node)
        #expect(try mapping.map { try scalar($0.key).string } == ["interval", "devices"])
        #expect(mapping[0].key.mark == YAMLMark(line: 1, column: 1))
        #expect(mapping[0].value.mark == YAMLMark(line: 1, column: 11))
        let devices = try sequence(mapping[1].value)
        let device = try self.mapping(devices[0])
        #expect(devices.mark == YAMLMark(line: 3, column: 3))
        #expect(device.mark == YAMLMark(line: 3, column: 5))
        #expect(device.map(\.value.tag) == [.str, .int, .float, .bool, .null, .str])
        #expect(device[5].value.mark == YAMLMark(line: 3, column: 52))
    }

    @Test func explicitTagsWinAndTheNonSpecificTagMeansString() throws {
        let items = try sequence(try root("[!!str 30, ! 30, !secret x, !!int \"7\", 'yes']"))
        #expect(items.map(\.tag) == [.str, .str, YAMLTag("!secret"), .int, .str])
        #expect(YAMLTag("tag:yaml.org,2002:binary").description == "!!binary")
        #expect(YAMLTag("!secret").description == "!secret")
    }

    @Test func blockScalarsAreStringsAndKeepTheirText() throws {
        let mapping = try mapping(try root("a: |\n  30\n  40\nb: >-\n  yes\n"))
        let a = try scalar(mapping[0].value)
        let b = try scalar(mapping[1].value)
        #expect(a.string == "30\n40\n" && a.tag == .str)
        #expect(b.string == "yes" && b.tag == .str)
    }

    @Test func aliasesAreTheAnchoredNode() throws {
        let mapping = try mapping(try root("a: &reads [2a19, 2a6e]\nb: *reads\n"))
        let a = try sequence(mapping[0].value)
        let b = try sequence(mapping[1].value)
        #expect(a == b)
        #expect(b.count == 2)
    }

    @Test func emptyTextsHoldNoDocument() throws {
        #expect(try YAMLDocument.root(of: "") == nil)
        #expect(try YAMLDocument.root(of: "# only a comment\n") == nil)
        #expect(try YAMLDocument.root(of: "---\n")?.tag == .null)
    }

    @Test func syntaxErrorsCarryLibyamlsWordsAndPosition() throws {
        let flow = try #require(failure("interval: 30s\ndevices: [\n"))
        #expect(flow.stage == .parser)
        #expect(flow.problem == "did not find expected node content")
        #expect(flow.mark == YAMLMark(line: 3, column: 1))
        #expect(flow.context?.text == "while parsing a flow node")
        #expect(flow.description.hasPrefix("did not find expected node content (while parsing a flow node at line"))
        let tab = try #require(failure("a:\n\tb: 1\n"))
        #expect(tab.stage == .scanner)
        #expect(tab.mark.line == 2)
    }

    @Test func aReaderErrorIsPlacedByLineAndColumn() throws {
        let control = try #require(failure("a: 1\nbé: \u{01}\n"))
        #expect(control.stage == .reader)
        #expect(control.problem == "control characters are not allowed")
        #expect(control.mark == YAMLMark(line: 2, column: 5))
    }

    @Test func anUndefinedAliasASecondDocumentAndSelfReferenceAreRefused() throws {
        let alias = try #require(failure("interval: *nowhere\n"))
        #expect(alias.stage == .composer && alias.problem == "found undefined alias")
        #expect(alias.mark == YAMLMark(line: 1, column: 11))
        let second = try #require(failure("a: 1\n---\nb: 2\n"))
        #expect(second.stage == .composer && second.problem == "but found another document")
        #expect(second.mark == YAMLMark(line: 2, column: 1))
        // An anchor names its node once the node is complete: a node cannot contain itself.
        let recursive = try #require(failure("a: &x [*x]\n"))
        #expect(recursive.problem == "found undefined alias")
    }

    @Test func duplicateKeysAreReportedAtTheFirstUseSorted() throws {
        let error = try #require(failure("b: 1\na: 2\nc: 3\na: 4\nb: 5\n"))
        #expect(error.stage == .duplicateKeys)
        #expect(error.duplicateKeys == ["a", "b"])
        #expect(error.mark == YAMLMark(line: 2, column: 1))
        // The same text with another tag is another key.
        #expect(failure("1: a\n\"1\": b\n") == nil)
    }

    @Test func nestingPastTheLimitIsRefusedWhereItPassesIt() throws {
        let depth = YAMLDocument.depthLimit
        #expect(failure(String(repeating: "[", count: depth) + String(repeating: "]", count: depth)) == nil)
        let deep = try #require(failure(String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)))
        #expect(deep.stage == .composer)
        #expect(deep.mark == YAMLMark(line: 1, column: depth + 1))
    }
}
