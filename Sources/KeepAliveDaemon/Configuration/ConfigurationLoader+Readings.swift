import KeepAlive
import Polling
import Readings
internal import YAML

// The parts of a device entry (and of a profile) that say what to do and how to decode it: `write:`, `read:`,
// `notify:`, each read or listened characteristic with an optional `name`, `size` and `fields` layout.

extension ConfigurationLoader {
    /// What a device or a profile writes, reads and listens to, and how its values decode; with where each
    /// characteristic was declared, for messages that name both places of a clash.
    struct Operations {
        var writes: [PeripheralSpec.Write] = []
        var reads: [BluetoothUUID] = []
        var notifications: [PeripheralSpec.Subscription] = []
        var decoding: [BluetoothUUID: PeripheralSpec.Decoding] = [:]
        var origins: [BluetoothUUID: Origin] = [:]
        var listenings: [Listening] = []

        struct Origin {
            var location: SourceLocation
            var field: String
            /// Where each field of its layout was written, by field name.
            var fieldLocations: [String: SourceLocation] = [:]
        }

        struct Listening {
            var characteristic: BluetoothUUID
            var duration: Duration
            var location: SourceLocation
            var field: String
            /// Where `expect_every` was written, when it was.
            var silenceLocation: SourceLocation? = nil
        }

        /// `other` on top of these: its writes after these; a characteristic both declare is read (or listened
        /// to) once, as `other` says, in this one's place.
        func merged(with other: Operations) -> Operations {
            var result = self
            result.writes += other.writes
            for uuid in other.reads where !result.reads.contains(uuid) { result.reads.append(uuid) }
            for subscription in other.notifications {
                if let index = result.notifications.firstIndex(where: {
                    $0.characteristic == subscription.characteristic
                }) {
                    result.notifications[index] = subscription
                    result.listenings.removeAll { $0.characteristic == subscription.characteristic }
                } else {
                    result.notifications.append(subscription)
                }
            }
            result.listenings += other.listenings
            for (uuid, decoding) in other.decoding { result.decoding[uuid] = decoding }
            for (uuid, origin) in other.origins { result.origins[uuid] = origin }
            return result
        }
    }

    /// Reads `write:`, `read:` or `notify:` of a device or profile mapping into `operations`.
    static func operation(
        _ key: String, _ value: YAMLNode, field: String, into operations: inout Operations, in document: Document
    ) throws(ConfigurationError) {
        switch key {
        case "write":
            let items = try document.sequence(
                value, field, expected: "a sequence of writes like [{uuid: 2a06, value: \"01\"}]")
            for (index, item) in items.enumerated() {
                operations.writes.append(try write(item, path: "\(field)[\(index)]", in: document))
            }
        case "read":
            let items = try document.sequence(
                value, field, expected: "a sequence of UUIDs like [2a19], or of {uuid:, fields:}")
            for (index, item) in items.enumerated() {
                let itemPath = "\(field)[\(index)]"
                let (uuid, uuidNode, decoding, origin, _) = try characteristic(
                    item, path: itemPath, extraKeys: [], in: document)
                // Compared in canonical form: 2a19 and 00002a19-0000-1000-8000-00805f9b34fb are one.
                if let first = operations.reads.firstIndex(of: uuid) {
                    throw document.error(
                        .invalidValue, at: uuidNode, itemPath,
                        "\(uuid.shortDescription) is already read at \(field)[\(first)]: each characteristic once"
                    )
                }
                operations.reads.append(uuid)
                operations.decoding[uuid] = decoding
                operations.origins[uuid] = origin
            }
        case "notify":
            let items = try document.sequence(value, field, expected: "a sequence like [{uuid: 2a6e, for: 1s}]")
            for (index, item) in items.enumerated() {
                let itemPath = "\(field)[\(index)]"
                let (uuid, uuidNode, decoding, origin, extras) = try characteristic(
                    item, path: itemPath, extraKeys: ["for", "expect_every"], in: document)
                if let first = operations.notifications.firstIndex(where: { $0.characteristic == uuid }) {
                    // BlueZ refuses a second StartNotify on one characteristic (InProgress).
                    throw document.error(
                        .invalidValue, at: uuidNode, "\(itemPath).uuid",
                        """
                            \(uuid.shortDescription) is already listened to at \(field)[\(first)]: each \
                            characteristic once
                            """
                    )
                }
                guard let durationNode = extras["for"] else {
                    throw document.error(
                        .missingKey, at: item, "\(itemPath).for",
                        "`\(itemPath)` needs `for:`, how long to listen (e.g. 2s)")
                }
                let duration = try document.duration(durationNode, "\(itemPath).for")
                let silence = try extras["expect_every"].map { node throws(ConfigurationError) in
                    try document.duration(node, "\(itemPath).expect_every")
                }
                operations.notifications.append(.init(characteristic: uuid, duration: duration, silence: silence))
                operations.listenings.append(
                    .init(
                        characteristic: uuid, duration: duration, location: document.location(durationNode),
                        field: "\(itemPath).for",
                        silenceLocation: extras["expect_every"].map(document.location)))
                operations.decoding[uuid] = decoding
                operations.origins[uuid] = origin
            }
        default:
            break
        }
    }

    /// A read or notify entry: a bare UUID, or `{uuid, name?, size?, fields?}` (+ `extraKeys`).
    private static func characteristic(
        _ item: YAMLNode, path: String, extraKeys: [String], in document: Document
    ) throws(ConfigurationError) -> (
        BluetoothUUID, YAMLNode, PeripheralSpec.Decoding?, Operations.Origin, extras: [String: YAMLNode]
    ) {
        guard case .mapping = item else {
            guard extraKeys.isEmpty else {
                throw document.wrongType(item, path, expected: "a mapping like {uuid: 2a6e, for: 1s}")
            }
            let uuid = try document.uuid(item, path)
            return (uuid, item, nil, Operations.Origin(location: document.location(item), field: path), [:])
        }
        let fields = try Fields(
            item, path: path, allowed: ["uuid", "name", "size", "fields"] + extraKeys, in: document,
            expected: "a mapping like {uuid: 2a6e} or {uuid: …, fields: […]}"
        )
        let uuidNode = try fields.required("uuid")
        let uuid = try document.uuid(uuidNode, fields.field("uuid"))
        var origin = Operations.Origin(location: document.location(uuidNode), field: path)
        var decoding = PeripheralSpec.Decoding()
        if let nameNode = fields["name"] {
            decoding.name = try document.readingName(nameNode, fields.field("name"))
        }
        var size: Int?
        if let sizeNode = fields["size"] {
            size = try document.integer(sizeNode, fields.field("size"), in: 1...512)
        }
        if let fieldsNode = fields["fields"] {
            if fields["name"] != nil {
                throw document.error(
                    .invalidValue, at: fields["name"] ?? item, fields.field("name"),
                    """
                        `name` names the single reading of a characteristic without `fields`; with fields, each field \
                        has its own name
                        """
                )
            }
            let (layout, locations) = try self.layout(
                fieldsNode, size: size, path: fields.field("fields"), in: document)
            decoding.layout = layout
            origin.fieldLocations = locations
        } else if let sizeNode = fields["size"] {
            throw document.error(
                .invalidValue, at: sizeNode, fields.field("size"),
                "`size` describes a payload with `fields:`; there are none")
        }
        var extras: [String: YAMLNode] = [:]
        for key in extraKeys { extras[key] = fields[key] }
        return (uuid, uuidNode, decoding.layout == nil && decoding.name == nil ? nil : decoding, origin, extras)
    }
}

extension ConfigurationLoader.Document {
    /// A reading name as records and Home Assistant use it: lower-case snake_case, from a letter.
    func readingName(_ node: YAMLNode, _ field: String) throws(ConfigurationError) -> String {
        let written = try text(node, field, expected: "a name like soil_moisture")
        guard let first = written.utf8.first, first >= UInt8(ascii: "a"), first <= UInt8(ascii: "z"),
            written.utf8.count <= 64,
            written.utf8.allSatisfy({
                ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z"))
                    || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || $0 == UInt8(ascii: "_")
            })
        else {
            throw error(
                .invalidValue, at: node, field,
                """
                    `\(ConfigurationLoader.shown(written))` is not a reading name: lower-case letters, digits and _, \
                    from a letter (e.g. soil_moisture)
                    """
            )
        }
        return written
    }
}
