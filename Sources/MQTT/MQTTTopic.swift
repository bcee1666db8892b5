/// Topic and topic-filter checks made before any C call, so that a bad topic is a typed error naming it rather
/// than libmosquitto's MOSQ_ERR_INVAL.
enum MQTTTopic {
    /// The MQTT limit on a topic's length in UTF-8 bytes.
    static let maximumLength = 65_535

    /// A topic to publish to: not empty, no `+` or `#`, no NUL, at most 65 535 bytes of UTF-8.
    static func validatePublish(_ topic: String) throws(MQTTError) {
        try validateCommon(topic, kind: "publish topic")
        if topic.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") }) {
            throw invalid(topic, "publish topic", "contains a wildcard (+ or #)")
        }
    }

    /// A topic filter to subscribe to: as a topic, but `+` may fill a whole level and `#` only the last one.
    static func validateFilter(_ filter: String) throws(MQTTError) {
        try validateCommon(filter, kind: "topic filter")
        let levels = filter.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        for (index, level) in levels.enumerated() {
            if level.contains(UInt8(ascii: "+")), level.count != 1 {
                throw invalid(filter, "topic filter", "has + inside a level")
            }
            if level.contains(UInt8(ascii: "#")), level.count != 1 || index != levels.count - 1 {
                throw invalid(filter, "topic filter", "has # other than as the whole last level")
            }
        }
    }

    private static func validateCommon(_ topic: String, kind: String) throws(MQTTError) {
        if topic.isEmpty { throw invalid(topic, kind, "is empty") }
        if topic.utf8.contains(0) { throw invalid(topic, kind, "contains a NUL character") }
        if topic.utf8.count > maximumLength {
            throw invalid(topic, kind, "is \(topic.utf8.count) bytes long, more than \(maximumLength)")
        }
    }

    private static func invalid(_ topic: String, _ kind: String, _ reason: String) -> MQTTError {
        // A long topic is shortened in the message; the error is for a log line.
        let shown = topic.utf8.count > 200 ? String(topic.prefix(200)) + "…" : topic
        let printable = shown.replacingNUL()
        return MQTTError(code: .invalidTopic, message: "the \(kind) \"\(printable)\" \(reason)")
    }
}

extension String {
    fileprivate func replacingNUL() -> String {
        String(unicodeScalars.map { $0 == "\0" ? "\\0" : String($0) }.joined())
    }
}
