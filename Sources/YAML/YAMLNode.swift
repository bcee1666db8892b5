/// One node of a YAML document, as the configuration reader walks it: a scalar with its resolved tag, a mapping
/// (pairs in file order) or a sequence, each with the position where it starts.
///
/// Aliases are already replaced by the node their anchor names (arrays are shared, not copied), so a walk never
/// sees one.
package enum YAMLNode: Sendable, Equatable {
    case scalar(YAMLScalar)
    case mapping(YAMLMapping)
    case sequence(YAMLSequence)

    /// The resolved tag: `.str`, `.int`, `.null`, … for scalars (see `YAMLTag/resolve(plain:)`), `.map` and `.seq`
    /// for collections unless the file tags them otherwise.
    package var tag: YAMLTag {
        switch self {
        case .scalar(let scalar): scalar.tag
        case .mapping(let mapping): mapping.tag
        case .sequence(let sequence): sequence.tag
        }
    }

    /// Where the node starts in the text.
    package var mark: YAMLMark {
        switch self {
        case .scalar(let scalar): scalar.mark
        case .mapping(let mapping): mapping.mark
        case .sequence(let sequence): sequence.mark
        }
    }
}

/// A 1-based line and column (columns count Unicode scalars, as libyaml does).
package struct YAMLMark: Sendable, Hashable {
    package var line: Int
    package var column: Int

    package init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }
}

package struct YAMLScalar: Sendable, Equatable {
    /// The value as written, quotes and escapes resolved.
    package var string: String
    package var tag: YAMLTag
    package var mark: YAMLMark

    package init(_ string: String, tag: YAMLTag, mark: YAMLMark) {
        self.string = string
        self.tag = tag
        self.mark = mark
    }
}

package struct YAMLMapping: Sendable, Equatable, RandomAccessCollection {
    package typealias Pair = (key: YAMLNode, value: YAMLNode)

    package var tag: YAMLTag
    package var mark: YAMLMark
    private var keys: [YAMLNode]
    private var values: [YAMLNode]

    package init(_ pairs: [Pair], tag: YAMLTag = .map, mark: YAMLMark) {
        self.tag = tag
        self.mark = mark
        keys = pairs.map(\.key)
        values = pairs.map(\.value)
    }

    package var startIndex: Int { 0 }
    package var endIndex: Int { keys.count }
    package subscript(position: Int) -> Pair { (keys[position], values[position]) }

    package static func == (left: YAMLMapping, right: YAMLMapping) -> Bool {
        left.tag == right.tag && left.mark == right.mark && left.keys == right.keys && left.values == right.values
    }
}

package struct YAMLSequence: Sendable, Equatable, RandomAccessCollection {
    package var tag: YAMLTag
    package var mark: YAMLMark
    private var items: [YAMLNode]

    package init(_ items: [YAMLNode], tag: YAMLTag = .seq, mark: YAMLMark) {
        self.tag = tag
        self.mark = mark
        self.items = items
    }

    package var startIndex: Int { 0 }
    package var endIndex: Int { items.count }
    package subscript(position: Int) -> YAMLNode { items[position] }
}
