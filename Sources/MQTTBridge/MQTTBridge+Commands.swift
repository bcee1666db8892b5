import Basics
import KeepAlive
import Logging
import MQTT

#if canImport(Glibc)
    import Glibc
#endif

extension MQTTBridge {
    /// A command that cannot be carried out, and where to say so.
    struct CommandRejection: Error, Sendable, Hashable {
        /// Why, in a word, for the log's folding of repeats: `unknownDevice`, `tooLong`, `retained`, `notADuration`,
        /// `belowFloor`; or the daemon's (``MQTTBridge/refuse(_:kind:reason:)``), `pollPending`, `pollTooSoon`.
        var kind: String
        /// The device (its name), or nil for a topic that names none configured (answered on the gateway's topic).
        var device: String?
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
                // Debug: the daemon logs what it does with each command (`poll on command`, `interval changed on
                // command`) and the bridge every refusal, folded; a line per command received let a flood of
                // valid-looking polls write one line each.
                logger.debug(
                    "command received",
                    metadata: ["topic": "\(MessageText.topic(message.topic))", "command": "\(command)"])
                commandContinuation.yield(command)
            case .success(nil):
                continue
            case .failure(let rejection):
                reject(rejection)
            }
        }
    }

    /// Answers on the device's error topic a command the daemon will not carry out although it is well formed (a
    /// poll while one it asked for is pending, or too soon after the last), exactly as a malformed one is answered
    /// (``reject(_:)``): the log folds a flood of them, and the answers are limited. `kind` is the word the log folds
    /// by, `reason` what the sender reads after the command's topic.
    public func refuse(_ command: BridgeCommand, kind: String, reason: String) {
        let (device, topic) =
            switch command {
            case .pollNow(let device): (device, topics.poll(device))
            case .setInterval(let device, _): (device, topics.intervalSet(device))
            }
        reject(
            CommandRejection(
                kind: kind, device: device, topic: topics.error(device),
                message: "\(MessageText.topic(topic)): \(reason)"))
    }

    /// Logs a rejected command and answers it on its error topic. The log line names the device (the gateway for
    /// a topic naming none), the kind and its source, so the daemon's log folds a flood of them into one line and a
    /// summary (an hour later or at shutdown; not when the device polls well, the source being the sender);
    /// the answers are limited per device and per gateway (``AnswerLimiter``), and one that goes out after some
    /// were withheld says how many.
    private func reject(_ rejection: CommandRejection) {
        let device = rejection.device ?? configuration.gateway
        logger.warning(
            "command rejected",
            metadata: [
                "device": "\(device)", "error": "\(rejection.kind)", "reason": "\(rejection.message)", "source": "mqtt",
            ])
        let now = Duration.nanoseconds(clockNanoseconds(CLOCK_MONOTONIC))
        let sent = state.withLock { state -> Bool in
            guard case .send(let withheld) = state.answers.admit(device, at: now) else { return false }
            let note = withheld == 0 ? "" : " (\(withheld) more rejected since the last answer here, not answered)"
            state.enqueue(
                .message(
                    MQTTOutgoingMessage(
                        topic: rejection.topic, payload: Array((rejection.message + note).utf8),
                        qos: configuration.qos, retain: false)))
            return true
        }
        if sent { wakeupContinuation.yield() }
    }

    /// The command in `message`, nil for a message that is not one, or why it is refused with the topic to answer
    /// on: malformed, retained (a retained command would be carried out again at every connection, long after the
    /// configuration changed: an interval from one would outlive every edit of the file), or an interval below the
    /// device's floor (``BridgeDevice/minimumInterval``: `1ms` made a sensor poll without pause).
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
        // Topics are up to 65,535 bytes and come from anyone: shortened wherever they are repeated.
        let shown = MessageText.topic(message.topic)
        let configured = state.withLock { state in
            state.deviceByLevel[String(level)].map { ($0, state.devices[$0]?.device.minimumInterval) }
        }
        guard let (device, floor) = configured else {
            return .failure(
                CommandRejection(
                    kind: "unknownDevice", device: nil, topic: topics.gatewayError,
                    message:
                        """
                        \(shown): no device \"\(MessageText.shown(level))\" is configured on gateway \
                        \(configuration.gateway)
                        """))
        }
        func rejected(_ kind: String, _ why: String) -> Result<BridgeCommand?, CommandRejection> {
            .failure(
                CommandRejection(kind: kind, device: device, topic: topics.error(device), message: "\(shown): \(why)"))
        }
        guard message.payload.count <= configuration.maximumCommandBytes else {
            return rejected(
                "tooLong",
                "payload of \(message.payload.count) bytes is longer than \(configuration.maximumCommandBytes)")
        }
        if message.retain {
            return rejected(
                "retained",
                "a retained command is refused: the broker would hand it over again at every start; publish it "
                    + "without retain, and clear this one with an empty retained message")
        }
        if kind == "poll" {
            return .success(.pollNow(device: device))
        }
        let text = String(decoding: message.payload, as: UTF8.self)
        // The configuration's own grammar and bounds (DurationText): what `interval:` accepts, a command accepts.
        switch DurationText.check(text) {
        case .success(let interval):
            // Floored before the daemon sees it: the configuration's own rule (`min_interval`), on the base interval
            // (low power still stretches what is accepted).
            if let floor, interval < floor {
                return rejected(
                    "belowFloor",
                    "\(interval.compact) is shorter than min_interval \(floor.compact), the shortest interval "
                        + "allowed for this device")
            }
            return .success(.setInterval(device: device, interval))
        case .failure(let problem):
            return rejected("\(problem.kind)", problem.message)
        }
    }
}
