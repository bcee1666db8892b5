import Basics

/// The top-level string members of a poll record (`address`, `holder`, `ts`, `result`, …), for the fleet view,
/// which shows the last poll of every shared device from the records on the state topics.
package enum RecordStrings {
    /// Records are small (one device's poll and its readings); a larger payload on a state topic is not one.
    static let maximumBytes = 1 << 20

    /// The string members of the JSON object in `payload`, by key; nil when the payload is not a JSON object.
    package static func of(_ payload: [UInt8]) -> [String: String]? {
        guard case .object(let members)? = try? JSONParser.parse(payload, anyNumber: true, maximumBytes: maximumBytes)
        else { return nil }
        var strings: [String: String] = [:]
        for (key, value) in members {
            if case .string(let text) = value { strings[key] = text }
        }
        return strings
    }
}
