import Fleet
import Basics

/// What `keepalive fleet` shows: every gateway and every shared device, from the broker's retained fleet topics
/// and the records on the state topics. Fed message by message; rendered as a table or a JSON object.
package struct FleetView: Sendable {
    package struct Gateway: Sendable {
        package var status: String?
        package var version: String?
        var adapters: [GatewayDescription.Adapter] = []
    }

    package struct Device: Sendable {
        /// The last lease message: its kind and sender (the holder, unless it was a release).
        package var lease: (kind: String, gateway: String)?
        var reach: [String: ReachReport] = [:]
        package var lastPoll: (ts: String, gateway: String, name: String, result: String)?

        package var holder: String? {
            guard let lease, lease.kind != LeaseMessage.Kind.release.rawValue else { return nil }
            return lease.gateway
        }
    }

    let topics: FleetTopics
    /// The bridge's topic prefix: `<prefix>/<gateway>/<device>/state` carries the records.
    package let statePrefix: String
    package private(set) var gateways: [String: Gateway] = [:]
    package private(set) var devices: [String: Device] = [:]
    /// Messages that could not be read, with their topics (shown, never dropped silently).
    package private(set) var problems: [String] = []

    package init(topicPrefix: String, statePrefix: String) {
        topics = FleetTopics(prefix: topicPrefix)
        self.statePrefix = statePrefix
    }

    /// The filters to subscribe to.
    package var filters: [String] { [topics.prefix + "/#", statePrefix + "/+/+/state"] }

    package mutating func receive(topic: String, payload: [UInt8]) {
        if let parsed = topics.parse(topic) {
            guard !payload.isEmpty else { return }  // a cleared retained message
            do {
                switch parsed {
                case .status(let gateway):
                    gateways[gateway, default: Gateway()].status = String(decoding: payload, as: UTF8.self)
                case .description(let gateway):
                    let description = try GatewayDescription(decoding: payload)
                    gateways[gateway, default: Gateway()].version = description.version
                    gateways[gateway, default: Gateway()].adapters = description.adapters
                case .lease(let device):
                    let message = try LeaseMessage(decoding: payload)
                    devices[device, default: Device()].lease = (message.kind.rawValue, message.id.gateway)
                case .reach(let device, let gateway):
                    devices[device, default: Device()].reach[gateway] = try ReachReport(decoding: payload)
                }
            } catch {
                problems.append("\(topic): \(error)")
            }
            return
        }
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        guard topic.hasPrefix(statePrefix + "/"), levels.last == "state", levels.count >= 4,
            let record = RecordStrings.of(payload), let address = record["address"]?.uppercased(),
            let holder = record["holder"]
        else { return }
        devices[address, default: Device()].lastPoll = (
            record["ts"] ?? "?", holder, record["device"] ?? "?", record["result"] ?? "?"
        )
    }

    /// How many devices each gateway holds.
    package var held: [String: Int] {
        var held: [String: Int] = [:]
        for device in devices.values { if let holder = device.holder { held[holder, default: 0] += 1 } }
        return held
    }

    package var json: String {
        var object = JSONObject()
        let held = self.held
        object.array("gateways", gateways.keys.sorted()) { entry, name in
            let gateway = gateways[name]!
            entry.string("name", name)
            if let status = gateway.status { entry.string("status", status) } else { entry.null("status") }
            if let version = gateway.version { entry.string("version", version) } else { entry.null("version") }
            entry.array("adapters", gateway.adapters) { adapter, value in
                adapter.string("name", value.name)
                adapter.integer("capacity", UInt64(max(0, value.slots)))
            }
            entry.integer("held", UInt64(held[name] ?? 0))
        }
        object.array("devices", devices.keys.sorted()) { entry, address in
            let device = devices[address]!
            entry.string("address", address)
            if let holder = device.holder { entry.string("holder", holder) } else { entry.null("holder") }
            if let lease = device.lease { entry.string("lease", lease.kind) } else { entry.null("lease") }
            entry.object("reach") { reach in
                for gateway in device.reach.keys.sorted() {
                    let report = device.reach[gateway]!
                    reach.object(gateway) { value in
                        value.string("adapter", report.adapter)
                        if let rssi = report.rssi { value.integer("rssi", rssi) } else { value.null("rssi") }
                        value.integer("success_permille", UInt64(report.successPermille))
                    }
                }
            }
            if let poll = device.lastPoll {
                entry.object("last_poll") { value in
                    value.string("ts", poll.ts)
                    value.string("gateway", poll.gateway)
                    value.string("device", poll.name)
                    value.string("result", poll.result)
                }
            } else {
                entry.null("last_poll")
            }
        }
        object.array("problems", problems) { entry, problem in entry.string("message", problem) }
        return object.finished
    }

    package var table: String {
        let held = self.held
        var lines = ["GATEWAY           STATUS    VERSION   HELD  ADAPTERS (capacity)"]
        for name in gateways.keys.sorted() {
            let gateway = gateways[name]!
            let adapters = gateway.adapters.map { "\($0.name) (\($0.slots))" }.joined(separator: ", ")
            lines.append(
                Self.pad(name, 18) + Self.pad(gateway.status ?? "?", 10) + Self.pad(gateway.version ?? "?", 10)
                    + Self.pad(String(held[name] ?? 0), 6) + adapters)
        }
        lines.append("")
        lines.append("DEVICE             HOLDER            LEASE    RSSI BY GATEWAY                 LAST POLL")
        for address in devices.keys.sorted() {
            let device = devices[address]!
            let reach = device.reach.keys.sorted().map { gateway in
                "\(gateway) \(device.reach[gateway]!.rssi.map(String.init) ?? "—")"
            }.joined(separator: ", ")
            let poll = device.lastPoll.map { "\($0.ts) by \($0.gateway) (\($0.name)) \($0.result)" } ?? "—"
            lines.append(
                Self.pad(address, 19) + Self.pad(device.holder ?? "—", 18) + Self.pad(device.lease?.kind ?? "—", 9)
                    + Self.pad(reach.isEmpty ? "—" : reach, 32) + poll)
        }
        for problem in problems { lines.append("unreadable: \(problem)") }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }
}
