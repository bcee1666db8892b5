import Basics
import KeepAlive
import Logging
import MQTT

extension MQTTBridge {
    /// A command that cannot be carried out, and where to say so.
    struct CommandRejection: Error, Sendable, Hashable {
        var topic: String
        var message: String
    }

    /// Messages of the subscriptions: commands, and HA's birth message.
    func handleMessages(of client: MQTTClient) async {
        for await message in client.messages {
            if configuration.discovery, message.topic == discovery.homeAssistantStatus {
                // HA forgets non-retained discovery when it restarts; it says `online` when it is back.
                if message.payload.elementsEqual("online".utf8) {
                    logger.info("Home Assistant is online; announcing discovery again")
                    state.withLock { $0.enqueue(.announceAll) }
                    wakeupContinuation.yield()
                }
                continue
            }
            switch parseCommand(message) {
            case .success(let command?):
                logger.info("command received", metadata: ["topic": "\(message.topic)", "command": "\(command)"])
                commandContinuation.yield(command)
            case .success(nil):
                continue
            case .failure(let rejection):
                logger.warning(
                    "command rejected", metadata: ["topic": "\(message.topic)", "reason": "\(rejection.message)"])
                let reply = MQTTOutgoingMessage(
                    topic: rejection.topic, payload: Array(rejection.message.utf8), qos: configuration.qos,
                    retain: false)
                state.withLock { $0.enqueue(.message(reply)) }
                wakeupContinuation.yield()
            }
        }
    }

    /// The command in `message`, nil for a message that is not one, or why it is refused with the topic to answer
    /// on: malformed, or retained (a retained command would be carried out again at every connection, long after the
    /// configuration changed: an interval from one would outlive every edit of the file).
    func parseCommand(_ message: MQTTMessage) -> Result<BridgeCommand?, CommandRejection> {
        let base = topics.base + "/"
        guard message.topic.hasPrefix(base) else { return .success(nil) }
        let rest = message.topic.dropFirst(base.count)
        let kind: String
        let level: Substring
        if rest.hasSuffix("/interval/set") {
            kind = "interval/set"
            level = rest.dropLast("/interval/set".count)
        } else if rest.hasSuffix("/poll") {
            kind = "poll"
            level = rest.dropLast("/poll".count)
        } else {
            return .success(nil)
        }
        // An empty payload is how MQTT clears a retained message: as an interval, no command and nothing to answer.
        // (An empty poll is still a poll: `mosquitto_pub -n` is a natural way to ask for one.)
        if message.payload.isEmpty, kind == "interval/set" { return .success(nil) }
        guard let device = state.withLock({ $0.deviceByLevel[String(level)] }) else {
            return .failure(
                CommandRejection(
                    topic: topics.gatewayError,
                    message:
                        "\(message.topic): no device \"\(level)\" is configured on gateway \(configuration.gateway)"))
        }
        guard message.payload.count <= configuration.maximumCommandBytes else {
            return .failure(
                CommandRejection(
                    topic: topics.error(device),
                    message: "\(message.topic): payload of \(message.payload.count) bytes is longer than "
                        + "\(configuration.maximumCommandBytes)"))
        }
        if message.retain {
            return .failure(
                CommandRejection(
                    topic: topics.error(device),
                    message: "\(message.topic): a retained command is refused: the broker would hand it over again at "
                        + "every start; publish it without retain, and clear this one with an empty retained message"))
        }
        if kind == "poll" {
            return .success(.pollNow(device: device))
        }
        let text = String(decoding: message.payload, as: UTF8.self)
        // The configuration's own grammar and bounds (DurationText): what `interval:` accepts, a command accepts.
        switch DurationText.check(text) {
        case .success(let interval):
            return .success(.setInterval(device: device, interval))
        case .failure(let problem):
            return .failure(
                CommandRejection(topic: topics.error(device), message: "\(message.topic): \(problem.message)"))
        }
    }
}
