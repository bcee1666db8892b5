/// Why a text is not one YAML document, where, in libyaml's own words.
package struct YAMLError: Error, Sendable, Equatable, CustomStringConvertible {
    package enum Stage: Sendable, Equatable {
        /// The bytes: not UTF-8, or a control character YAML does not allow.
        case reader
        /// Tokens: an unterminated quote, a tab where indentation is, …
        case scanner
        /// Structure: a missing `]`, a key where a value is expected, …
        case parser
        /// Nodes: an alias without its anchor, a second document, nesting past the limit.
        case composer
        /// The same key twice in one mapping (`duplicateKeys` names them, `mark` is the first one's first use).
        case duplicateKeys
        case memory
    }

    /// What libyaml was reading when it found the problem (`while parsing a flow mapping`), and where that began.
    package struct Context: Sendable, Equatable {
        package var text: String
        package var mark: YAMLMark
    }

    package var stage: Stage
    package var problem: String
    package var mark: YAMLMark
    package var context: Context?
    package var duplicateKeys: [String]

    package init(
        _ stage: Stage, _ problem: String, at mark: YAMLMark, context: Context? = nil, duplicateKeys: [String] = []
    ) {
        self.stage = stage
        self.problem = problem
        self.mark = mark
        self.context = context
        self.duplicateKeys = duplicateKeys
    }

    /// `did not find expected node content (while parsing a flow node at line 2, column 11)`.
    package var description: String {
        let during = context.map { " (\($0.text) at line \($0.mark.line), column \($0.mark.column))" } ?? ""
        return problem + during
    }
}
