/// The fleet's topic tree under one prefix (default `keepalive/fleet`):
///
/// - `<prefix>/gateway/<gateway>/status` — `online` / `offline` (retained; `offline` is the last will)
/// - `<prefix>/gateway/<gateway>/description` — ``GatewayDescription`` (retained)
/// - `<prefix>/device/<device>/lease` — ``LeaseMessage`` (retained, QoS 1; the only topic safety depends on)
/// - `<prefix>/device/<device>/reach/<gateway>` — ``ReachReport`` (retained)
public struct FleetTopics: Sendable {
    public var prefix: String

    public init(prefix: String = "keepalive/fleet") {
        self.prefix = prefix
    }

    /// Gateway and device names become topic levels, so they may not contain MQTT's separators or wildcards,
    /// and are kept short and printable.
    public static func isValidName(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 128 else { return false }
        return name.utf8.allSatisfy {
            $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "+") && $0 != UInt8(ascii: "#")
        }
    }

    public func status(of gateway: String) -> String { "\(prefix)/gateway/\(gateway)/status" }
    public func description(of gateway: String) -> String { "\(prefix)/gateway/\(gateway)/description" }
    public func lease(of device: String) -> String { "\(prefix)/device/\(device)/lease" }
    public func reach(of device: String, by gateway: String) -> String { "\(prefix)/device/\(device)/reach/\(gateway)" }

    /// The filter matching every gateway's status.
    public var allStatuses: String { "\(prefix)/gateway/+/status" }
    /// The filter matching every gateway's reach report for one device.
    public func allReach(of device: String) -> String { "\(prefix)/device/\(device)/reach/+" }

    /// What a received topic is about.
    public enum Parsed: Equatable, Sendable {
        case status(gateway: String)
        case description(gateway: String)
        case lease(device: String)
        case reach(device: String, gateway: String)
    }

    public func parse(_ topic: String) -> Parsed? {
        guard topic.hasPrefix(prefix + "/") else { return nil }
        let levels = topic.dropFirst(prefix.count + 1).split(separator: "/", omittingEmptySubsequences: false)
        switch (levels.count, levels.first) {
        case (3, "gateway"?) where levels[2] == "status": return .status(gateway: String(levels[1]))
        case (3, "gateway"?) where levels[2] == "description": return .description(gateway: String(levels[1]))
        case (3, "device"?) where levels[2] == "lease": return .lease(device: String(levels[1]))
        case (4, "device"?) where levels[2] == "reach":
            return .reach(device: String(levels[1]), gateway: String(levels[3]))
        default: return nil
        }
    }
}
