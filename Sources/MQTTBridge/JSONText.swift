import Basics

/// A tiny JSON writer for discovery payloads: keys in the order written, strings escaped per RFC 8259.
///
/// Hand-written rather than Foundation's `JSONSerialization` (the team is removing Foundation) and with the
/// key order fixed, so that a payload is byte-for-byte the same each time it is announced and tests can read it.
///
/// ```swift
/// var json = JSONText.Object()
/// json.string("name", "Temperature")
/// json.array("connections") { $0.array { $0.string("mac"); $0.string(address) } }
/// let payload = json.bytes
/// ```
enum JSONText {
    typealias Object = JSONObject
    typealias Array = JSONArray
}
