/// Every topic the bridge publishes to or subscribes to, built in one place from the prefix and gateway.
///
/// | topic | payload | retained |
/// |---|---|---|
/// | `<prefix>/<gateway>/status` | `online` / `offline` (also the will) | yes |
/// | `<prefix>/<gateway>/dropped` | records the spool dropped, full or damaged, a decimal count | yes |
/// | `<prefix>/<gateway>/health` | the daemon's status line (problems first), when the daemon reports one | yes |
/// | `<prefix>/<gateway>/error` | a command for an unknown device, as text | no |
/// | `<prefix>/<gateway>/<device>/state` | the poll record (JSON Lines object) | no |
/// | `<prefix>/<gateway>/<device>/history` | a record of the device's own history (`"source":"history"`) | no |
/// | `<prefix>/<gateway>/<device>/availability` | `online` / `offline` | yes |
/// | `<prefix>/<gateway>/<device>/failures` | consecutive failed polls, decimal | yes |
/// | `<prefix>/<gateway>/<device>/interval` | the effective interval, e.g. `30s` | yes |
/// | `<prefix>/<gateway>/<device>/event/<reading>` | a new advertised event: `{"event_type":"press"}` | no |
/// | `<prefix>/<gateway>/<device>/error` | a refused command (malformed, below the floor, too soon), as text | no |
/// | `<prefix>/<gateway>/<device>/poll` | subscribed: poll now (any payload up to 64 bytes) | — |
/// | `<prefix>/<gateway>/<device>/interval/set` | subscribed: `30s`, `2m`, `500ms` | — |
///
/// Names become single topic levels through ``level(_:)``.
struct BridgeTopics: Sendable {
    let base: String

    init(prefix: String, gateway: String) {
        base = Self.level(prefix) + "/" + Self.level(gateway)
    }

    var status: String { base + "/status" }
    var dropped: String { base + "/dropped" }
    /// The daemon's health: `STATUS=`'s line (what it polls; a stalled scheduler, an adapter given up on first).
    var health: String { base + "/health" }
    var gatewayError: String { base + "/error" }
    /// The command filters: one `+` level for the device name.
    var pollFilter: String { base + "/+/poll" }
    var intervalSetFilter: String { base + "/+/interval/set" }

    func device(_ name: String) -> String { base + "/" + Self.level(name) }
    func state(_ name: String) -> String { device(name) + "/state" }
    func history(_ name: String) -> String { device(name) + "/history" }
    /// Where a spooled record goes: its device's `state`, or `history` for a history record.
    func record(_ record: SpoolRecord) -> String { record.history ? history(record.device) : state(record.device) }
    func availability(_ name: String) -> String { device(name) + "/availability" }
    func failures(_ name: String) -> String { device(name) + "/failures" }
    func interval(_ name: String) -> String { device(name) + "/interval" }
    func intervalSet(_ name: String) -> String { device(name) + "/interval/set" }
    func poll(_ name: String) -> String { device(name) + "/poll" }
    func error(_ name: String) -> String { device(name) + "/error" }
    /// Events of reading `reading` (a button, a dimmer) of device `name`.
    func event(_ name: String, reading: String) -> String { device(name) + "/event/" + Self.level(reading) }

    /// A name as one valid topic level: `/` (a level separator), `+` and `#` (wildcards, which a publish topic
    /// must not contain) and NUL (forbidden by MQTT) become `_`, as do other control characters (U+0000–U+001F,
    /// U+007F), which MQTT allows but which make topics unreadable in every tool; an empty name becomes `_`.
    /// Other characters (spaces, UTF-8) are kept: they are valid and people chose them. Two names that differ
    /// only in replaced characters map to the same level; configuration loading should reject such pairs.
    static func level(_ name: String) -> String {
        if name.isEmpty { return "_" }
        var scalars = String.UnicodeScalarView()
        for scalar in name.unicodeScalars {
            switch scalar {
            case "/", "+", "#": scalars.append("_")
            case _ where scalar.value < 0x20 || scalar.value == 0x7F: scalars.append("_")
            default: scalars.append(scalar)
            }
        }
        return String(scalars)
    }

    /// A name as a Home Assistant discovery `node_id` / `object_id` / unique id part: HA accepts only
    /// `[a-zA-Z0-9_-]` there, so everything else becomes `_`, and letters are lower-cased so that an address
    /// written either way gives one id.
    static func identifier(_ name: String) -> String {
        if name.isEmpty { return "_" }
        var result = ""
        for scalar in name.unicodeScalars {
            switch scalar {
            case "a"..."z", "0"..."9", "_", "-": result.unicodeScalars.append(scalar)
            case "A"..."Z": result.unicodeScalars.append(Unicode.Scalar(scalar.value + 32) ?? "_")
            default: result += "_"
            }
        }
        return result
    }
}

/// The bridge's names for a device, for the configuration's rules: two devices with one topic level, or one Home
/// Assistant identity, would mix their records and entities, so the configuration refuses them before a bridge is
/// made.
package enum BridgeNaming {
    /// The device's topic level (``BridgeTopics/level(_:)``).
    package static func topicLevel(_ name: String) -> String { BridgeTopics.level(name) }

    /// The identity Home Assistant knows the device by, from its address.
    package static func identity(ofAddress address: String) -> String {
        DiscoveryPayloads.addressIdentifier(address)
    }
}
