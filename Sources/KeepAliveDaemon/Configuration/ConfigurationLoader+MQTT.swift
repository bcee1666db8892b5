internal import YAML

// `mqtt:`: the broker's URL, credentials from a file, TLS files, topics, discovery and the spool; each value
// checked where it is written.

extension ConfigurationLoader {
    static let mqttKeys = [
        "broker", "client_id", "username", "password_file", "tls", "topic_prefix", "gateway", "qos", "discovery",
        "discovery_prefix", "spool", "offline_after",
    ]

    static func mqtt(_ node: YAMLNode, in document: Document) throws(ConfigurationError) -> DaemonConfiguration.MQTT {
        let fields = try Fields(
            node, path: "mqtt", allowed: mqttKeys, in: document,
            expected: "a mapping like {broker: mqtt://localhost:1883}")
        let brokerNode = try fields.required("broker")
        let (scheme, host, port) = try broker(brokerNode, in: document)
        var mqtt = DaemonConfiguration.MQTT(scheme: scheme, host: host, port: port, location: document.location(node))
        for pair in fields.pairs {
            let value = pair.value
            let field = fields.field(pair.key)
            switch pair.key {
            case "client_id":
                mqtt.clientID = try document.topicLevel(value, field, expected: "a client id like keepalive-greenhouse")
            case "username": mqtt.username = try document.nonEmptyText(value, field, expected: "a user name")
            case "password_file": mqtt.passwordFile = try document.path(value, field)
            case "tls":
                let tls = try Fields(
                    value, path: field, allowed: ["ca_file", "cert_file", "key_file"], in: document,
                    expected: "a mapping like {ca_file: /etc/keepalive/ca.pem}")
                if let ca = tls["ca_file"] { mqtt.caFile = try document.path(ca, tls.field("ca_file")) }
                if let cert = tls["cert_file"] {
                    mqtt.certificateFile = try document.path(cert, tls.field("cert_file"))
                }
                if let key = tls["key_file"] { mqtt.keyFile = try document.path(key, tls.field("key_file")) }
                if (mqtt.certificateFile == nil) != (mqtt.keyFile == nil) {
                    throw document.error(
                        .missingKey, at: value, field, "a client certificate needs both `cert_file` and `key_file`")
                }
                if scheme != .tls {
                    throw document.error(
                        .invalidValue, at: value, field,
                        "TLS settings for a `mqtt://` broker: write the broker as `mqtts://…` to use them")
                }
            case "topic_prefix":
                mqtt.topicPrefix = try document.topicLevel(value, field, expected: "a topic level like keepalive")
            case "gateway":
                mqtt.gateway = try document.topicLevel(value, field, expected: "a gateway name like greenhouse-pi")
            case "qos": mqtt.qos = try document.integer(value, field, in: 0...2)
            case "discovery": mqtt.discovery = try document.boolean(value, field)
            case "discovery_prefix":
                mqtt.discoveryPrefix = try document.topicLevel(
                    value, field, expected: "a topic level like homeassistant")
            case "spool":
                let spool = try Fields(
                    value, path: field, allowed: ["path", "size"], in: document,
                    expected: "a mapping like {path: /var/lib/keepalive/spool, size: 16MiB}")
                if let path = spool["path"] { mqtt.spoolPath = try document.path(path, spool.field("path")) }
                if let size = spool["size"] { mqtt.spoolSize = try document.byteSize(size, spool.field("size")) }
            case "offline_after": mqtt.offlineAfter = try document.integer(value, field, in: 1...1000)
            default: break
            }
        }
        return mqtt
    }

    /// `mqtt://host[:port]`, `mqtts://host[:port]` or `host[:port]` (plain); IPv6 in brackets.
    private static func broker(_ node: YAMLNode, in document: Document) throws(ConfigurationError) -> (
        DaemonConfiguration.MQTT.Scheme, String, Int?
    ) {
        let field = "mqtt.broker"
        let written = try document.nonEmptyText(node, field, expected: "a broker like mqtt://localhost:1883")
        var rest = Substring(written)
        var scheme = DaemonConfiguration.MQTT.Scheme.plain
        if let separator = rest.firstRange(of: "://") {
            let name = rest[..<separator.lowerBound]
            guard let known = DaemonConfiguration.MQTT.Scheme(rawValue: String(name)) else {
                throw document.error(
                    .invalidValue, at: node, field, "unknown scheme `\(shown(name))://`: use mqtt:// or mqtts://")
            }
            scheme = known
            rest = rest[separator.upperBound...]
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("/"), !rest.contains("@"), !rest.isEmpty else {
            throw document.error(
                .invalidValue, at: node, field,
                """
                    `\(shown(written))` is not a broker address: write mqtt://HOST:PORT (credentials go in `username` \
                    and `password_file`)
                    """
            )
        }
        var host = rest
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else {
                throw document.error(.invalidValue, at: node, field, "an IPv6 address needs its closing `]`")
            }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") {
                portText = after.dropFirst()
            } else if !after.isEmpty {
                throw document.error(.invalidValue, at: node, field, "unexpected `\(shown(after))` after the address")
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        }
        var port: Int?
        if let portText {
            guard let number = Int(portText), (1...65_535).contains(number) else {
                throw document.error(
                    .invalidValue, at: node, field, "port `\(shown(portText))` is not a number from 1 to 65535")
            }
            port = number
        }
        guard !host.isEmpty, host.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw document.error(.invalidValue, at: node, field, "`\(shown(written))` has no host name")
        }
        return (scheme, String(host), port)
    }
}

extension ConfigurationLoader.Document {
    /// One MQTT topic level: no `/`, `+`, `#`, NUL or spaces, at most 64 bytes.
    func topicLevel(_ node: YAMLNode, _ field: String, expected: String) throws(ConfigurationError) -> String {
        let written = try nonEmptyText(node, field, expected: expected)
        guard written.utf8.count <= 64,
            !written.utf8.contains(where: {
                $0 <= 0x20 || $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#")
            })
        else {
            throw error(
                .invalidValue, at: node, field,
                "`\(ConfigurationLoader.shown(written))` is not one topic level: no /, +, #, spaces; at most 64 bytes")
        }
        return written
    }

    /// An absolute path.
    func path(_ node: YAMLNode, _ field: String) throws(ConfigurationError) -> String {
        let written = try nonEmptyText(node, field, expected: "an absolute path like /etc/keepalive/file")
        guard written.hasPrefix("/"), !written.utf8.contains(0) else {
            throw error(
                .invalidValue, at: node, field, "`\(ConfigurationLoader.shown(written))` is not an absolute path")
        }
        return written
    }

    func boolean(_ node: YAMLNode, _ field: String) throws(ConfigurationError) -> Bool {
        guard case .scalar(let scalar) = node, node.tag == YAMLTag.bool else {
            throw wrongType(node, field, expected: "true or false")
        }
        return ["true", "True", "TRUE", "yes", "on"].contains(scalar.string)
    }

    /// A size with a unit: `512KiB`, `16MiB`, `1GiB` (or bytes with `B`); from 64 KiB to 64 GiB.
    func byteSize(_ node: YAMLNode, _ field: String) throws(ConfigurationError) -> Int {
        let written = try text(node, field, expected: "a size like 16MiB")
        let units: [(String, Int)] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1)]
        for (suffix, factor) in units where written.hasSuffix(suffix) {
            guard let number = Int(written.dropLast(suffix.count)), number > 0, number <= (64 << 30) / factor else {
                break
            }
            let bytes = number * factor
            guard bytes >= 64 << 10 else {
                throw error(
                    .invalidValue, at: node, field, "\(written) is less than 64KiB, too small to hold a record or two")
            }
            return bytes
        }
        throw error(
            .invalidValue, at: node, field,
            "`\(ConfigurationLoader.shown(written))` is not a size like 16MiB (units B, KiB, MiB, GiB; at most 64GiB)")
    }
}
