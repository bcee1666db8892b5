/// Counters of a bridge since it was created (the spool's counts include records found on disk at start).
public struct BridgeStatistics: Sendable, Hashable {
    /// Records appended to the spool by ``MQTTBridge/submit(device:sequence:succeeded:readings:payload:)``.
    public var spooled: UInt64
    /// Records the broker acknowledged (PUBACK at QoS 1).
    public var delivered: UInt64
    /// Records dropped because the spool was full, damaged or could not be written (since the spool directory was
    /// created: the count is kept on disk, and published retained on `<prefix>/<gateway>/dropped`).
    public var dropped: UInt64
    /// Records in the spool not yet acknowledged.
    public var pending: Int
    /// Bytes the spool's segments take on disk.
    public var spoolBytes: Int
    /// Records lost to damage in the spool (a torn tail after a crash, a flipped bit, a zeroed page), found at
    /// start or at delivery; also counted in ``dropped``.
    public var corrupt: UInt64
    /// Records that could not be written to the spool (a full disk, a file made read-only) since the bridge was
    /// created; also counted in ``dropped``.
    public var unwritten: UInt64
    /// Connected to the broker now.
    public var connected: Bool
}
