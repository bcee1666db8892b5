/// What the bridge has announced to Home Assistant, kept in a small file next to the spool so that the next
/// start can clear what is no longer configured.
///
/// Why a file rather than reading the retained configs back from the broker: a subscriber cannot tell when the
/// broker has finished sending retained messages (there is no end marker), so reading back would be a guess
/// with a timeout, and it would find nothing on a broker that lost its retained store, then again clear
/// nothing. The file is exact and local; its one blind spot (a deleted spool directory) leaves stale configs
/// that HA's "delete device" removes.
///
/// It also remembers the readings seen per device, so that sensors known only at run time (names from the
/// 0x2904 descriptor) are announced again after a restart before the first record.
///
/// Format (`discovery.state`, UTF-8 lines, fields separated by a tab, replaced atomically on change):
/// ```
/// keepalive-discovery 1
/// topic	<key>	<discovery config topic>
/// reading	<address>	<name>	<unit or empty>	<1 for text, 2 for a boolean, else 0>
/// passive	<address>
/// ```
/// `passive` lines name the devices learned to be passive from their records (configured ones need none).
/// `<key>` is the device's address, or `gateway` for the gateway's own entities. Unknown or malformed lines
/// are ignored (the worst outcome is a stale config not cleared).
struct AnnouncedState: Sendable, Hashable {
    static let fileName = "discovery.state"
    static let header = "keepalive-discovery 1"

    /// Discovery topics published with a config, by device key.
    var topics: [String: Set<String>] = [:]
    /// Readings seen, by device address, in the order first seen.
    var readings: [String: [BridgeDevice.ExpectedReading]] = [:]
    /// Addresses of devices learned to be passive (their records came from advertisements).
    var passive: Set<String> = []

    init() {}

    init(parsing bytes: [UInt8]) {
        let lines = bytes.split(separator: UInt8(ascii: "\n")).map { String(decoding: $0, as: UTF8.self) }
        guard lines.first == Self.header else { return }
        for line in lines.dropFirst() {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            switch fields.first {
            case "topic" where fields.count == 3:
                topics[fields[1], default: []].insert(fields[2])
            case "reading" where fields.count == 5:
                let reading = BridgeDevice.ExpectedReading(
                    name: fields[2], unit: fields[3].isEmpty ? nil : fields[3], isText: fields[4] == "1",
                    isBoolean: fields[4] == "2")
                if !(readings[fields[1]]?.contains { $0.name == reading.name } ?? false) {
                    readings[fields[1], default: []].append(reading)
                }
            case "passive" where fields.count == 2:
                passive.insert(fields[1])
            default:
                continue
            }
        }
    }

    var encoded: [UInt8] {
        var text = Self.header + "\n"
        for key in topics.keys.sorted() {
            for topic in topics[key, default: []].sorted() { text += "topic\t\(key)\t\(Self.clean(topic))\n" }
        }
        for address in readings.keys.sorted() {
            for reading in readings[address, default: []] {
                text +=
                    "reading\t\(address)\t\(Self.clean(reading.name))\t\(Self.clean(reading.unit ?? ""))\t"
                    + (reading.isText ? "1" : reading.isBoolean ? "2" : "0") + "\n"
            }
        }
        for address in passive.sorted() { text += "passive\t\(Self.clean(address))\n" }
        return Array(text.utf8)
    }

    /// Tabs and newlines cannot be stored (they separate fields and lines); they never occur in the values
    /// the bridge writes (topics and reading names it built), so replacing them loses nothing real.
    private static func clean(_ value: String) -> String {
        String(String.UnicodeScalarView(value.unicodeScalars.map { $0 == "\t" || $0 == "\n" ? " " : $0 }))
    }
}
