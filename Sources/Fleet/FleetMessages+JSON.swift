public import Basics

/// Why a payload from the broker was ignored. Reported as a diagnostic, never thrown past the state machine.
public enum FleetDecodingError: Error, Equatable, Sendable {
    case syntax(JSONSyntaxError)
    case notAnObject
    case missingField(String)
    case invalidField(String)
    case unsupportedVersion(Int64)
}

/// The wire format, version 1: compact JSON with one- or two-letter keys, fields always in the same order.
/// Integers only; lease durations in milliseconds; `v` first so a future version can be refused early.
extension LeaseMessage {
    static let formatVersion: Int64 = 1

    public func encoded() -> [UInt8] {
        var members: [(String, JSONValue)] = [
            ("v", .integer(Self.formatVersion)),
            ("k", .string(kind.rawValue)),
        ]
        members.append(contentsOf: Self.members(of: id))
        members.append(("p", previous.map { .object(Self.members(of: $0)) } ?? .null))
        members.append(("l", .integer(leaseNanoseconds / 1_000_000)))
        if let successor { members.append(("to", .string(successor))) }
        return JSONValue.object(members).encoded()
    }

    public init(decoding payload: [UInt8]) throws(FleetDecodingError) {
        let value = try FleetWire.parseObject(payload)
        guard let kindName = value["k"]?.stringValue else { throw .missingField("k") }
        guard let kind = Kind(rawValue: kindName) else { throw .invalidField("k") }
        let id = try FleetWire.messageID(in: value, field: "id")
        let previous: FleetMessageID?
        switch value["p"] {
        case nil: throw .missingField("p")
        case .null?: previous = nil
        case let nested?: previous = try FleetWire.messageID(in: nested, field: "p")
        }
        guard let milliseconds = value["l"]?.integerValue else { throw .missingField("l") }
        // A lease of zero or of more than a day is not a configuration anyone meant; refusing it keeps the
        // arithmetic of expiry far from overflow.
        guard milliseconds > 0, milliseconds <= 86_400_000 else { throw .invalidField("l") }
        var successor: String?
        if let field = value["to"] {
            guard let name = field.stringValue, FleetTopics.isValidName(name) else { throw .invalidField("to") }
            successor = name
        }
        self.init(
            kind: kind, id: id, previous: previous, leaseNanoseconds: milliseconds * 1_000_000, successor: successor)
    }

    private static func members(of id: FleetMessageID) -> [(String, JSONValue)] {
        [
            ("g", .string(id.gateway)),
            ("i", .integer(Int64(bitPattern: id.incarnation))),
            ("n", .integer(Int64(bitPattern: id.sequence))),
        ]
    }
}

extension ReachReport {
    public func encoded() -> [UInt8] {
        JSONValue.object([
            ("v", .integer(LeaseMessage.formatVersion)),
            ("g", .string(gateway)),
            ("a", .string(adapter)),
            ("r", rssi.map { .integer(Int64($0)) } ?? .null),
            ("s", .integer(Int64(successPermille))),
            ("f", .integer(Int64(freeSlots))),
        ]).encoded()
    }

    public init(decoding payload: [UInt8]) throws(FleetDecodingError) {
        let value = try FleetWire.parseObject(payload)
        let gateway = try FleetWire.name(in: value, key: "g")
        let adapter = try FleetWire.name(in: value, key: "a")
        var rssi: Int?
        switch value["r"] {
        case nil: throw .missingField("r")
        case .null?: rssi = nil
        case .integer(let dBm)?:
            guard dBm >= -127, dBm <= 20 else { throw .invalidField("r") }
            rssi = Int(dBm)
        default: throw .invalidField("r")
        }
        let success = try FleetWire.integer(in: value, key: "s", range: 0...1000)
        let free = try FleetWire.integer(in: value, key: "f", range: 0...1_000_000)
        self.init(gateway: gateway, adapter: adapter, rssi: rssi, successPermille: success, freeSlots: free)
    }
}

extension GatewayDescription {
    public func encoded() -> [UInt8] {
        JSONValue.object([
            ("v", .integer(LeaseMessage.formatVersion)),
            ("g", .string(gateway)),
            ("ver", .string(version)),
            ("a", .array(adapters.map { .object([("n", .string($0.name)), ("s", .integer(Int64($0.slots)))]) })),
        ]).encoded()
    }

    public init(decoding payload: [UInt8]) throws(FleetDecodingError) {
        let value = try FleetWire.parseObject(payload)
        let gateway = try FleetWire.name(in: value, key: "g")
        guard let version = value["ver"]?.stringValue else { throw .missingField("ver") }
        guard case .array(let elements)? = value["a"] else { throw .missingField("a") }
        var adapters: [Adapter] = []
        for element in elements {
            let name = try FleetWire.name(in: element, key: "n")
            let slots = try FleetWire.integer(in: element, key: "s", range: 0...1000)
            adapters.append(Adapter(name: name, slots: slots))
        }
        self.init(gateway: gateway, version: version, adapters: adapters)
    }
}

/// Field readers shared by the decoders: each missing or out-of-range field is its own typed error.
enum FleetWire {
    static func parseObject(_ payload: [UInt8]) throws(FleetDecodingError) -> JSONValue {
        let value: JSONValue
        do {
            value = try JSONParser.parse(payload)
        } catch {
            throw .syntax(error)
        }
        guard case .object = value else { throw .notAnObject }
        guard let version = value["v"]?.integerValue else { throw .missingField("v") }
        guard version == LeaseMessage.formatVersion else { throw .unsupportedVersion(version) }
        return value
    }

    static func name(in value: JSONValue, key: String) throws(FleetDecodingError) -> String {
        guard let field = value[key] else { throw .missingField(key) }
        guard let name = field.stringValue, FleetTopics.isValidName(name) else { throw .invalidField(key) }
        return name
    }

    static func integer(in value: JSONValue, key: String, range: ClosedRange<Int64>) throws(FleetDecodingError) -> Int {
        guard let field = value[key] else { throw .missingField(key) }
        guard let number = field.integerValue, range.contains(number) else { throw .invalidField(key) }
        return Int(number)
    }

    static func messageID(in value: JSONValue, field: String) throws(FleetDecodingError) -> FleetMessageID {
        let gateway = try name(in: value, key: "g")
        guard let incarnation = value["i"]?.integerValue else { throw .missingField(field + ".i") }
        guard let sequence = value["n"]?.integerValue else { throw .missingField(field + ".n") }
        return FleetMessageID(
            gateway: gateway, incarnation: UInt64(bitPattern: incarnation), sequence: UInt64(bitPattern: sequence))
    }
}
