internal import Polling
internal import Readings
internal import YAML

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

extension ConfigurationLoader {
    /// `advertisements:` names, as written in the file.
    static let advertisementFormats: [String: AdvertisementFormat?] = [
        "bthome": .bthome, "pvvx": .pvvx, "atc1441": .atc1441, "mibeacon": .mibeacon, "ruuvi": .ruuviRAWv2,
        "auto": nil,
    ]

    /// A device's `advertisements:`, `key:` and `key_file:`. A key is checked here and kept only as bytes: it is
    /// never shown in a message, the file's or the log's.
    static func advertising(_ fields: Fields, in document: Document) throws(ConfigurationError)
        -> PeripheralSpec.Advertising?
    {
        let keyNode = fields["key"]
        let keyFileNode = fields["key_file"]
        guard let formatNode = fields["advertisements"] else {
            if let node = keyNode ?? keyFileNode {
                let field = fields.field(keyNode == nil ? "key_file" : "key")
                throw document.error(
                    .invalidValue, at: node, field,
                    "a key opens advertisements: add `advertisements: bthome` (or mibeacon, auto) to this device")
            }
            return nil
        }
        let formatField = fields.field("advertisements")
        let written = try document.nonEmptyText(
            formatNode, formatField, expected: "an advertisement format: bthome, pvvx, atc1441, mibeacon, ruuvi or auto"
        )
        guard let format = advertisementFormats[written] else {
            throw document.error(
                .invalidValue, at: formatNode, formatField,
                "`\(shown(written))` is not an advertisement format: bthome, pvvx, atc1441, mibeacon, ruuvi or auto")
        }
        var advertising = PeripheralSpec.Advertising(format: format)
        if let keyNode, let keyFileNode {
            throw document.error(
                .invalidValue, at: keyFileNode, fields.field("key_file"),
                "give the key once: `key:` (line \(document.location(keyNode).line)) or `key_file:`, not both")
        }
        if let keyNode {
            let field = fields.field("key")
            let text = try document.nonEmptyText(keyNode, field, expected: "32 hexadecimal digits")
            do {
                advertising.key = try AdvertisementKey(hex: text)
            } catch {
                throw document.error(.invalidValue, at: keyNode, field, error.message)
            }
        } else if let keyFileNode {
            let field = fields.field("key_file")
            let path = try document.nonEmptyText(keyFileNode, field, expected: "the path of a file holding the key")
            advertising.key = try key(fromFile: path, node: keyFileNode, field: field, in: document)
        }
        if advertising.key != nil, let format, format == .pvvx || format == .atc1441 || format == .ruuviRAWv2 {
            throw document.error(
                .invalidValue, at: keyNode ?? keyFileNode ?? formatNode,
                fields.field(keyNode == nil ? "key_file" : "key"),
                "\(format.displayName) advertisements are not encrypted here: a key would refuse every one of them")
        }
        return advertising
    }

    /// The key in the file at `path` (relative paths from the configuration's directory): 32 hexadecimal digits,
    /// surrounding white space ignored.
    private static func key(fromFile path: String, node: YAMLNode, field: String, in document: Document)
        throws(ConfigurationError) -> AdvertisementKey
    {
        var resolved = path
        if !path.hasPrefix("/"), let slash = document.file.lastIndex(of: "/") {
            resolved = String(document.file[...slash]) + path
        }
        let descriptor = open(resolved, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            throw document.error(
                .invalidValue, at: node, field,
                "cannot read the key file \(shown(resolved)): \(String(cString: strerror(code))) (errno \(code))")
        }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count >= 0 else {
            let code = errno
            throw document.error(
                .invalidValue, at: node, field,
                "cannot read the key file \(shown(resolved)): \(String(cString: strerror(code))) (errno \(code))")
        }
        let text = String(decoding: buffer[0..<count], as: UTF8.self).trimmingWhitespace
        do {
            return try AdvertisementKey(hex: text)
        } catch {
            throw document.error(.invalidValue, at: node, field, "the key file \(shown(resolved)): \(error.message)")
        }
    }

    /// `poll_when:`: `always` or `heard`.
    static func pollWhen(_ node: YAMLNode, _ field: String, in document: Document) throws(ConfigurationError)
        -> PeripheralSpec.PollWhen
    {
        let written = try document.nonEmptyText(node, field, expected: "always or heard")
        guard let value = PeripheralSpec.PollWhen(rawValue: written) else {
            throw document.error(
                .invalidValue, at: node, field,
                "`\(shown(written))` is not a poll condition: always (every tick) or heard (only when the device was "
                    + "heard advertising)")
        }
        return value
    }
}

extension String {
    /// Without leading and trailing spaces, tabs and line ends.
    fileprivate var trimmingWhitespace: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}
