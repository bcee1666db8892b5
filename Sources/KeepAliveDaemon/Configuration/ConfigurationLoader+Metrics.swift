internal import YAML

// `metrics:`: a node_exporter textfile and an HTTP endpoint, each optional, at least one.

extension ConfigurationLoader {
    static let metricsKeys = ["textfile", "listen"]

    static func metrics(_ node: YAMLNode, in document: Document) throws(ConfigurationError)
        -> DaemonConfiguration.Metrics
    {
        let fields = try Fields(
            node, path: "metrics", allowed: metricsKeys, in: document,
            expected: "a mapping like {textfile: /var/lib/node_exporter/keepalive.prom, listen: 127.0.0.1:9464}")
        var metrics = DaemonConfiguration.Metrics()
        for pair in fields.pairs {
            let field = fields.field(pair.key)
            switch pair.key {
            case "textfile":
                let path = try document.path(pair.value, field)
                guard !path.hasSuffix("/") else {
                    throw document.error(
                        .invalidValue, at: pair.value, field,
                        "`\(shown(path))` is a directory: name the file, like \(path)keepalive.prom")
                }
                metrics.textfile = path
            case "listen": metrics.listen = try listen(pair.value, field, in: document)
            default: break
            }
        }
        guard metrics.textfile != nil || metrics.listen != nil else {
            throw document.error(
                .missingKey, at: node, "metrics",
                "say where the metrics go: `textfile: PATH`, `listen: HOST:PORT`, or both")
        }
        return metrics
    }

    /// `HOST:PORT`, an IPv6 address in brackets (`[::1]:9464`); the port from 0 (the kernel picks one) to 65535.
    private static func listen(_ node: YAMLNode, _ field: String, in document: Document) throws(ConfigurationError)
        -> DaemonConfiguration.Metrics.Listen
    {
        let written = try document.nonEmptyText(node, field, expected: "an address like 127.0.0.1:9464")
        let host: Substring
        let portText: Substring
        if written.hasPrefix("[") {
            guard let close = written.firstIndex(of: "]") else {
                throw document.error(.invalidValue, at: node, field, "an IPv6 address needs its closing `]`")
            }
            host = written[written.index(after: written.startIndex)..<close]
            let after = written[written.index(after: close)...]
            guard after.hasPrefix(":") else {
                throw document.error(
                    .invalidValue, at: node, field, "`\(shown(written))` has no port: write it like [::1]:9464")
            }
            portText = after.dropFirst()
        } else {
            guard let colon = written.lastIndex(of: ":"), !written[..<colon].contains(":") else {
                throw document.error(
                    .invalidValue, at: node, field,
                    """
                    `\(shown(written))` is not HOST:PORT: write it like 127.0.0.1:9464 (an IPv6 address in brackets, \
                    like [::1]:9464)
                    """)
            }
            host = written[..<colon]
            portText = written[written.index(after: colon)...]
        }
        guard !host.isEmpty, host.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") }) else {
            throw document.error(.invalidValue, at: node, field, "`\(shown(written))` has no host")
        }
        guard let port = Int(portText), (0...65_535).contains(port) else {
            throw document.error(
                .invalidValue, at: node, field, "port `\(shown(portText))` is not a number from 0 to 65535")
        }
        return DaemonConfiguration.Metrics.Listen(host: String(host), port: port)
    }
}
