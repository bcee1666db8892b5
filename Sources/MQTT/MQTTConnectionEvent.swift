/// The MQTT protocol version of a connection.
public enum MQTTProtocolVersion: Sendable, Hashable {
    case v311
    case v5
}

/// What happened to the connection, in order, as ``MQTTClient/events`` delivers it.
public enum MQTTConnectionEvent: Sendable {
    /// CONNACK accepted. `sessionPresent` false means the broker had no session: subscriptions were sent again
    /// and a bridge should replay its spool.
    case connected(sessionPresent: Bool, protocolVersion: MQTTProtocolVersion)
    /// The connection was lost (not by ``MQTTClient/close(publishing:)``); a reconnection is scheduled.
    case disconnected(MQTTError)
    /// An automatic reconnection attempt failed; the next one is scheduled after the policy's delay, `retry`.
    case connectFailed(MQTTError, retry: Duration)
}

/// What a successful CONNECT found.
public struct MQTTConnectResult: Sendable, Hashable {
    /// The broker still had this client id's session (subscriptions, queued messages).
    public var sessionPresent: Bool
    /// MQTT 5, or 3.1.1 after the broker refused 5.
    public var protocolVersion: MQTTProtocolVersion
}

/// Counters for tests and diagnostics.
public struct MQTTStatistics: Sendable, Hashable {
    /// How often the client's thread came back from a blocking `epoll_wait`: socket data, work from other
    /// threads, a keep-alive check or a reconnection. An idle connected client adds one per keep-alive period.
    public var wakeups: Int
}
