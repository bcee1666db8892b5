internal import CYAML

/// Reads the one YAML document of a text into `YAMLNode`s: libyaml's events composed by hand (anchors, aliases,
/// implicit tags), nothing else kept. A configuration of 10,000 devices costs its nodes and nothing per node
/// beyond them (no regular expressions, no Foundation).
package enum YAMLDocument {
    /// How deep collections may nest. The configuration's deepest path is six levels; a text nested deeper is
    /// refused where it passes the limit, before the recursion could exhaust the stack.
    package static let depthLimit = 64

    /// The root of the text's single document; nil when the text holds none (empty, or only comments).
    ///
    /// Refused, with libyaml's words and a 1-based position: a text that is not YAML, an alias to an anchor not
    /// yet defined, a second document, the same key twice in one mapping, nesting deeper than `depthLimit`.
    package static func root(of text: String) throws(YAMLError) -> YAMLNode? {
        let bytes = Array(text.utf8)
        return try bytes.withUnsafeBufferPointer { buffer throws(YAMLError) -> YAMLNode? in
            let composer = Composer(buffer)
            defer { composer.close() }
            return try composer.singleRoot()
        }
    }
}

/// One pass over one text's events. Not shared between threads.
private final class Composer {
    private var parser = yaml_parser_t()
    private let input: UnsafeBufferPointer<UInt8>
    private var anchors: [String: YAMLNode] = [:]
    /// False when libyaml could not allocate its parser (out of memory): nothing is parsed then.
    private let initialized: Bool

    init(_ input: UnsafeBufferPointer<UInt8>) {
        self.input = input
        initialized = yaml_parser_initialize(&parser) == 1
        guard initialized else { return }
        yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING)
        // An empty buffer may have no base address; libyaml wants one.
        let empty: StaticString = ""
        yaml_parser_set_input_string(&parser, input.baseAddress ?? empty.utf8Start, input.count)
    }

    func close() {
        if initialized { yaml_parser_delete(&parser) }
    }

    func singleRoot() throws(YAMLError) -> YAMLNode? {
        guard initialized else { throw YAMLError(.memory, "out of memory", at: YAMLMark(line: 1, column: 1)) }
        try expect(YAML_STREAM_START_EVENT)
        var event = try next()
        if event.type == YAML_STREAM_END_EVENT {
            event.delete()
            return nil
        }
        guard event.type == YAML_DOCUMENT_START_EVENT else { throw unexpected(&event) }
        event.delete()
        let root = try node(from: try next(), depth: 0)
        try expect(YAML_DOCUMENT_END_EVENT)
        event = try next()
        defer { event.delete() }
        if event.type != YAML_STREAM_END_EVENT {
            throw YAMLError(
                .composer, "but found another document", at: event.start,
                context: .init(text: "expected a single document in the stream", mark: YAMLMark(line: 1, column: 1))
            )
        }
        return root
    }

    private func expect(_ type: yaml_event_type_t) throws(YAMLError) {
        var event = try next()
        guard event.type == type else { throw unexpected(&event) }
        event.delete()
    }

    // MARK: Nodes

    /// The node that begins with `event` (which this deletes), and all of its content.
    private func node(from event: Event, depth: Int) throws(YAMLError) -> YAMLNode {
        var event = event
        defer { event.delete() }
        let mark = event.start
        switch event.type {
        case YAML_ALIAS_EVENT:
            let name = Event.text(event.raw.data.alias.anchor) ?? ""
            guard let node = anchors[name] else {
                throw YAMLError(.composer, "found undefined alias", at: mark)
            }
            return node
        case YAML_SCALAR_EVENT:
            let scalar = event.raw.data.scalar
            let value = String(decoding: UnsafeBufferPointer(start: scalar.value, count: scalar.length), as: UTF8.self)
            let tag: YAMLTag =
                if let written = Event.text(scalar.tag) {
                    written == "!" ? .str : YAMLTag(written)
                } else if scalar.plain_implicit != 0 && scalar.style == YAML_PLAIN_SCALAR_STYLE {
                    YAMLTag.resolve(plain: value)
                } else {
                    .str
                }
            return anchored(Event.text(scalar.anchor), .scalar(YAMLScalar(value, tag: tag, mark: mark)))
        case YAML_SEQUENCE_START_EVENT:
            guard depth < YAMLDocument.depthLimit else { throw tooDeep(mark) }
            let start = event.raw.data.sequence_start
            let tag = Self.collectionTag(start.tag, otherwise: .seq)
            let anchor = Event.text(start.anchor)
            var items: [YAMLNode] = []
            while true {
                let item = try next()
                if item.type == YAML_SEQUENCE_END_EVENT {
                    var end = item
                    end.delete()
                    break
                }
                items.append(try node(from: item, depth: depth + 1))
            }
            return anchored(anchor, .sequence(YAMLSequence(items, tag: tag, mark: mark)))
        case YAML_MAPPING_START_EVENT:
            guard depth < YAMLDocument.depthLimit else { throw tooDeep(mark) }
            let start = event.raw.data.mapping_start
            let tag = Self.collectionTag(start.tag, otherwise: .map)
            let anchor = Event.text(start.anchor)
            var pairs: [YAMLMapping.Pair] = []
            while true {
                let keyEvent = try next()
                if keyEvent.type == YAML_MAPPING_END_EVENT {
                    var end = keyEvent
                    end.delete()
                    break
                }
                let key = try node(from: keyEvent, depth: depth + 1)
                let value = try node(from: try next(), depth: depth + 1)
                pairs.append((key, value))
            }
            try Self.refuseDuplicateKeys(pairs)
            return anchored(anchor, .mapping(YAMLMapping(pairs, tag: tag, mark: mark)))
        default:
            throw YAMLError(.composer, "unexpected event \(event.type.rawValue)", at: mark)
        }
    }

    private func anchored(_ anchor: String?, _ node: YAMLNode) -> YAMLNode {
        if let anchor { anchors[anchor] = node }
        return node
    }

    private static func collectionTag(_ written: UnsafeMutablePointer<yaml_char_t>?, otherwise: YAMLTag) -> YAMLTag {
        guard let name = Event.text(written), name != "!" else { return otherwise }
        return YAMLTag(name)
    }

    /// Scalar keys equal in text and tag; reported sorted, at the first one's first use.
    private static func refuseDuplicateKeys(_ pairs: [YAMLMapping.Pair]) throws(YAMLError) {
        guard pairs.count > 1 else { return }
        var firstUse: [YAMLScalarKey: YAMLMark] = [:]
        var duplicated: [YAMLScalarKey: YAMLMark] = [:]
        for (key, _) in pairs {
            guard case .scalar(let scalar) = key else { continue }
            let identity = YAMLScalarKey(text: scalar.string, tag: scalar.tag)
            if let first = firstUse[identity] {
                duplicated[identity] = first
            } else {
                firstUse[identity] = scalar.mark
            }
        }
        guard !duplicated.isEmpty else { return }
        let sorted = duplicated.sorted { $0.key.text < $1.key.text }
        throw YAMLError(
            .duplicateKeys, "duplicate key in one mapping", at: sorted[0].value, duplicateKeys: sorted.map(\.key.text)
        )
    }

    private func tooDeep(_ mark: YAMLMark) -> YAMLError {
        YAMLError(.composer, "collections nested more than \(YAMLDocument.depthLimit) levels deep", at: mark)
    }

    /// An event libyaml should not have produced where it did (its parser orders them); deletes it.
    private func unexpected(_ event: inout Event) -> YAMLError {
        defer { event.delete() }
        return YAMLError(.composer, "unexpected event \(event.type.rawValue)", at: event.start)
    }

    // MARK: Events

    /// The next event, or libyaml's error at its position.
    private func next() throws(YAMLError) -> Event {
        var event = Event()
        guard yaml_parser_parse(&parser, &event.raw) == 1 else { throw failure() }
        return event
    }

    private func failure() -> YAMLError {
        let problem = parser.problem.map { String(cString: $0) } ?? "unknown error"
        let context = parser.context.map {
            YAMLError.Context(text: String(cString: $0), mark: Self.mark(parser.context_mark))
        }
        switch parser.error {
        case YAML_MEMORY_ERROR:
            return YAMLError(.memory, "out of memory", at: YAMLMark(line: 1, column: 1))
        case YAML_READER_ERROR:
            return YAMLError(.reader, problem, at: position(ofByte: parser.problem_offset))
        case YAML_SCANNER_ERROR:
            return YAMLError(.scanner, problem, at: Self.mark(parser.problem_mark), context: context)
        default:
            return YAMLError(.parser, problem, at: Self.mark(parser.problem_mark), context: context)
        }
    }

    /// The 1-based line and column (in Unicode scalars) of a byte offset; libyaml's reader errors give only the
    /// offset.
    private func position(ofByte offset: Int) -> YAMLMark {
        var line = 1
        var column = 1
        for byte in input.prefix(offset) {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
        }
        return YAMLMark(line: line, column: column)
    }

    fileprivate static func mark(_ mark: yaml_mark_t) -> YAMLMark {
        YAMLMark(line: mark.line + 1, column: mark.column + 1)
    }
}

/// A scalar key's identity for the duplicate check.
private struct YAMLScalarKey: Hashable {
    var text: String
    var tag: YAMLTag
}

/// One libyaml event; whoever holds it last deletes it (events own their strings).
private struct Event {
    var raw = yaml_event_t()

    var type: yaml_event_type_t { raw.type }
    var start: YAMLMark { Composer.mark(raw.start_mark) }

    mutating func delete() {
        yaml_event_delete(&raw)
    }

    static func text(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
        pointer.map { String(cString: $0) }
    }
}
