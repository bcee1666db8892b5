/// One MQTT broker as the protocol relies on it: it handles one packet at a time, so every topic has one order,
/// and it forwards to each subscriber in that order over that subscriber's connection (FIFO). Retained messages
/// (the last per topic) go to a new subscription; a will is published when a connection is found dead.
///
/// Topic filters: exact topics, `a/b/+` (last level) and any filter with `+` levels (matched level by level; the
/// simulator uses one such filter per gateway, for the statuses).
struct SimulatedBroker {
    struct Message {
        var topic: String
        var payload: [UInt8]
    }

    var isUp = true
    /// Per gateway: the connection epoch of its live session, if any.
    var sessions: [Int: Int] = [:]
    private var exactSubscribers: [String: [Int]] = [:]
    private var lastLevelSubscribers: [String: [Int]] = [:]
    private var patternSubscribers: [(levels: [Substring], gateway: Int)] = []
    private var subscriptionsOf: [Int: [String]] = [:]
    private(set) var retained: [String: [UInt8]] = [:]
    /// Retained topics by their parent (all levels but the last), for `a/b/+` subscriptions.
    private var retainedChildren: [String: [String]] = [:]
    private var snapshot: [String: [UInt8]] = [:]

    static func parent(of topic: String) -> Substring {
        guard let slash = topic.lastIndex(of: "/") else { return "" }
        return topic[..<slash]
    }

    mutating func connect(gateway: Int, epoch: Int) {
        removeSubscriptions(of: gateway)
        sessions[gateway] = epoch
    }

    /// Ends a session (will or takeover); returns true if it was live.
    mutating func dropSession(of gateway: Int) -> Bool {
        removeSubscriptions(of: gateway)
        return sessions.removeValue(forKey: gateway) != nil
    }

    private mutating func removeSubscriptions(of gateway: Int) {
        for filter in subscriptionsOf.removeValue(forKey: gateway) ?? [] {
            if Self.isLastLevelFilter(filter) {
                lastLevelSubscribers[String(filter.dropLast(2))]?.removeAll { $0 == gateway }
            } else if filter.contains("+") {
                patternSubscribers.removeAll { $0.gateway == gateway }
            } else {
                exactSubscribers[filter]?.removeAll { $0 == gateway }
            }
        }
    }

    private static func isLastLevelFilter(_ filter: String) -> Bool {
        filter.hasSuffix("/+") && !filter.dropLast(2).contains("+")
    }

    /// Adds a subscription and returns the retained messages it matches, in topic order.
    mutating func subscribe(gateway: Int, filter: String) -> [Message] {
        subscriptionsOf[gateway, default: []].append(filter)
        if Self.isLastLevelFilter(filter) {
            let parent = String(filter.dropLast(2))
            lastLevelSubscribers[parent, default: []].append(gateway)
            return (retainedChildren[parent] ?? []).sorted().compactMap { topic in
                retained[topic].map { Message(topic: topic, payload: $0) }
            }
        }
        if filter.contains("+") {
            let levels = filter.split(separator: "/", omittingEmptySubsequences: false)
            patternSubscribers.append((levels, gateway))
            return retained.keys.sorted().filter { Self.matches(levels, $0) }.compactMap { topic in
                retained[topic].map { Message(topic: topic, payload: $0) }
            }
        }
        exactSubscribers[filter, default: []].append(gateway)
        return retained[filter].map { [Message(topic: filter, payload: $0)] } ?? []
    }

    private static func matches(_ levels: [Substring], _ topic: String) -> Bool {
        let topicLevels = topic.split(separator: "/", omittingEmptySubsequences: false)
        guard topicLevels.count == levels.count else { return false }
        return zip(levels, topicLevels).allSatisfy { $0 == "+" || $0 == $1 }
    }

    /// Stores a retained message and returns the subscribers to forward it to, in a fixed order.
    mutating func publish(topic: String, payload: [UInt8], retain: Bool) -> [Int] {
        if retain {
            if retained.updateValue(payload, forKey: topic) == nil {
                retainedChildren[String(Self.parent(of: topic)), default: []].append(topic)
            }
        }
        var subscribers = exactSubscribers[topic] ?? []
        subscribers += lastLevelSubscribers[String(Self.parent(of: topic))] ?? []
        if !patternSubscribers.isEmpty, topic.contains("/gateway/") {
            for pattern in patternSubscribers where Self.matches(pattern.levels, topic) {
                subscribers.append(pattern.gateway)
            }
        }
        return subscribers
    }

    mutating func autosave() {
        snapshot = retained
    }

    /// The broker process stops: every session is gone (no wills: mosquitto publishes none for its own shutdown).
    mutating func stop() {
        isUp = false
        sessions = [:]
        exactSubscribers = [:]
        lastLevelSubscribers = [:]
        patternSubscribers = []
        subscriptionsOf = [:]
    }

    mutating func start(persistence: SimulationScenario.Persistence) {
        isUp = true
        switch persistence {
        case .none: retained = [:]
        case .full: break
        case .autosave: retained = snapshot
        }
        retainedChildren = [:]
        for topic in retained.keys.sorted() {
            retainedChildren[String(Self.parent(of: topic)), default: []].append(topic)
        }
    }
}
