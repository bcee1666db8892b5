/// An MQTT 5 user property: a name/value pair, repeatable, order kept.
public struct MQTTUserProperty: Sendable, Hashable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// The MQTT 5 PUBLISH properties this module sends and reads.
///
/// Under MQTT 3.1.1 (a broker that refused MQTT 5) they are silently not sent: the protocol has no place for
/// them, and the reading is still worth delivering without its expiry or labels.
public struct MQTTProperties: Sendable, Hashable {
    /// Seconds after which the broker drops the message if it has not delivered it yet (and the retained copy).
    public var messageExpiryInterval: UInt32?
    /// The payload's MIME type, e.g. `application/json`.
    public var contentType: String?
    public var userProperties: [MQTTUserProperty]

    public init(
        messageExpiryInterval: UInt32? = nil, contentType: String? = nil, userProperties: [MQTTUserProperty] = []
    ) {
        self.messageExpiryInterval = messageExpiryInterval
        self.contentType = contentType
        self.userProperties = userProperties
    }

    public var isEmpty: Bool { messageExpiryInterval == nil && contentType == nil && userProperties.isEmpty }
}
