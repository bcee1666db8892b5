import KeepAlive
import Polling
import Readings
internal import YAML

// `fields:` of a vendor characteristic, and a device's `fields:` overrides of its profile's: each value checked
// where it is written, so a mistake is reported at its own line and column.

extension ConfigurationLoader {
    static let fieldKeys = ["name", "at", "format", "scale", "offset", "unit", "valid"]
    static let overrideKeys = ["scale", "offset", "unit", "valid"]

    /// A payload layout: one reading per field, with where each field was written.
    static func layout(
        _ node: YAMLNode, size: Int?, path: String, in document: Document
    ) throws(ConfigurationError) -> (Layout, [String: SourceLocation]) {
        let items = try document.sequence(
            node, path, expected: "a sequence of fields like [{name: temperature, at: 0, format: sint16le}]")
        guard !items.isEmpty else {
            throw document.error(.invalidValue, at: node, path, "the list is empty: a layout needs at least one field")
        }
        var fields: [Field] = []
        var locations: [String: SourceLocation] = [:]
        for (index, item) in items.enumerated() {
            let itemPath = "\(path)[\(index)]"
            let keys = try Fields(
                item, path: itemPath, allowed: fieldKeys, in: document,
                expected: "a field like {name: temperature, at: 0, format: sint16le}")
            let nameNode = try keys.required("name")
            let name = try document.readingName(nameNode, keys.field("name"))
            if let first = fields.firstIndex(where: { $0.name == name }) {
                throw document.error(
                    .invalidValue, at: nameNode, keys.field("name"),
                    """
                        the reading name `\(name)` is already \(path)[\(first)] (line \(locations[name]?.line ?? 0)): \
                        names must be unique on a device
                        """
                )
            }
            let atNode = try keys.required("at")
            let at = try document.integer(atNode, keys.field("at"), in: 0...511)
            let formatNode = try keys.required("format")
            let formatText = try document.text(
                formatNode, keys.field("format"), expected: "a format like uint8, sint16le, float32be, sfloat, utf8")
            let format: ValueFormat
            do {
                format = try ValueFormat(parsing: formatText)
            } catch {
                throw document.error(.invalidValue, at: formatNode, keys.field("format"), error.message)
            }
            var field = Field(name: name, at: at, format: format)
            try applyNumberSettings(keys, to: &field, in: document)
            if let size, let needed = format.byteCount, at + needed > size {
                throw document.error(
                    .invalidValue, at: atNode, keys.field("at"),
                    "`\(name)` needs \(needed) bytes at offset \(at), past the payload's declared size of \(size) bytes"
                )
            } else if let size, at >= size {
                throw document.error(
                    .invalidValue, at: atNode, keys.field("at"),
                    "offset \(at) is past the payload's declared size of \(size) bytes")
            }
            // The decoder's own checks: anything the ones above let through is still reported here, in place.
            if let problem = field.validate().first {
                throw document.error(.invalidValue, at: item, itemPath, problem.message)
            }
            fields.append(field)
            locations[name] = document.location(nameNode)
        }
        return (Layout(fields: fields, size: size), locations)
    }

    /// `scale`, `offset`, `unit` and `valid` of a field or an override; each refused on a text or hex field,
    /// where it would be silently meaningless.
    static func applyNumberSettings(_ keys: Fields, to field: inout Field, in document: Document)
        throws(ConfigurationError)
    {
        for key in overrideKeys {
            guard let node = keys[key] else { continue }
            let fieldPath = keys.field(key)
            guard field.format.isNumeric else {
                throw document.error(
                    .invalidValue, at: node, fieldPath,
                    """
                        `\(key)` makes no sense on a \(field.format.rawValue) field (`\(field.name)` is text): \
                        numbers only
                        """
                )
            }
            switch key {
            case "scale":
                guard case .scalar(let scalar) = node, [YAMLTag.int, YAMLTag.float].contains(node.tag) else {
                    throw document.wrongType(node, fieldPath, expected: "a number like 0.01")
                }
                do {
                    field.scale = try Scale(parsing: scalar.string)
                } catch {
                    throw document.error(.invalidValue, at: node, fieldPath, error.message)
                }
            case "offset":
                field.offset = try document.number(node, fieldPath, in: -1e12...1e12)
            case "unit":
                field.unit = try document.nonEmptyText(node, fieldPath, expected: "a unit symbol like °C, %, lx")
            case "valid":
                let bounds = try document.sequence(node, fieldPath, expected: "[minimum, maximum]")
                guard bounds.count == 2 else {
                    throw document.error(
                        .invalidValue, at: node, fieldPath,
                        "expected two numbers [minimum, maximum], found \(bounds.count)")
                }
                let minimum = try document.number(bounds[0], "\(fieldPath)[0]", in: -1e15...1e15)
                let maximum = try document.number(bounds[1], "\(fieldPath)[1]", in: -1e15...1e15)
                guard minimum <= maximum else {
                    throw document.error(
                        .invalidValue, at: node, fieldPath, "the minimum \(minimum) is above the maximum \(maximum)")
                }
                field.valid = ValidRange(minimum: minimum, maximum: maximum)
            default:
                break
            }
        }
    }

    /// A device's `fields:` mapping, reading name → `{scale, offset, unit, valid}`, applied to the layouts of
    /// its profile (and its own).
    static func applyOverrides(
        _ node: YAMLNode, path: String, to operations: inout Operations, in document: Document
    ) throws(ConfigurationError) {
        guard case .mapping(let mapping) = node else {
            throw document.wrongType(
                node, path, expected: "a mapping of reading names to settings, like {temperature: {offset: -0.5}}")
        }
        for (keyNode, value) in mapping {
            let name = try document.readingName(keyNode, path)
            let fieldPath = Fields.join(path, name)
            guard let (uuid, index) = fieldPosition(named: name, in: operations),
                var layout = operations.decoding[uuid]?.layout
            else {
                let known = operations.decoding.values.compactMap(\.layout).flatMap { $0.fields.map(\.name) }.sorted()
                throw document.error(
                    .invalidValue, at: keyNode, fieldPath,
                    "no field `\(name)` to override (fields: \(known.isEmpty ? "none" : known.joined(separator: ", ")))"
                )
            }
            let keys = try Fields(
                value, path: fieldPath, allowed: overrideKeys, in: document,
                expected: "a mapping like {offset: -0.5, unit: °C}")
            try applyNumberSettings(keys, to: &layout.fields[index], in: document)
            operations.decoding[uuid]?.layout = layout
        }
    }

    private static func fieldPosition(named name: String, in operations: Operations) -> (BluetoothUUID, Int)? {
        for (uuid, decoding) in operations.decoding {
            if let index = decoding.layout?.fields.firstIndex(where: { $0.name == name }) { return (uuid, index) }
        }
        return nil
    }
}
