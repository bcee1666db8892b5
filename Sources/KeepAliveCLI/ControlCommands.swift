import ArgumentParser
import DBus

#if canImport(Glibc)
    import Glibc
#endif

/// `keepalive status`: what the running daemon is doing now.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show what the running daemon is doing: each device, each adapter, the MQTT bridge.",
        discussion: """
            Asks the daemon over D-Bus (io.keepalive, open to every local user). Per device: its state, the last \
            result and how long ago, when it is due next, failures in a row and, for a fleet, who holds it. Exit \
            status 69 when no daemon answers.
            """
    )

    @Flag(name: .long, help: "The whole status as one JSON object.")
    var json = false

    @OptionGroup var bus: BusOptions

    func run() async throws {
        ignoreBrokenPipes()
        let reply = try await ControlClient(bus: bus.resolved).call("GetStatus")
        guard let status = reply.first else { throw ExitCode(ControlClient.unavailable) }
        writeOut(json ? status.json + "\n" : StatusView.text(status.fields, now: StatusView.nowMilliseconds()))
    }
}

/// `keepalive explain DEVICE`: why a device was (not) polled.
struct ExplainCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "explain",
        abstract: "Say why a device was or was not polled, tick by tick.",
        discussion: """
            The daemon keeps each device's recent decisions (fired, skipped and why, slot waits, window outcomes, \
            errors, healing on its adapter, fleet decisions), like ticks folded into one line. Example: \
            `keepalive explain porch` prints "now: backing off after 4 failures (connectionAborted): next try \
            14:06:00" and, tick by tick, "14:02:00 not polled: backing off after 4 failures (connectionAborted)".
            """
    )

    @Argument(help: ArgumentHelp("The device's name, as in the configuration.", valueName: "device"))
    var device: String

    @Flag(name: .long, help: "The explanation as one JSON object.")
    var json = false

    @OptionGroup var bus: BusOptions

    func run() async throws {
        ignoreBrokenPipes()
        let reply = try await ControlClient(bus: bus.resolved).call("Explain", [.string(device)])
        guard let explanation = reply.first else { throw ExitCode(ControlClient.unavailable) }
        writeOut(json ? explanation.json + "\n" : StatusView.explanation(explanation.fields))
    }
}

/// `keepalive poll DEVICE`: poll one device now.
struct PollCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "poll",
        abstract: "Poll a device now, outside its schedule (root and the keepalive group).",
        discussion: """
            The poll runs in the daemon, in a window of its own, under the connection limit and the device's \
            floor (min_interval), like an MQTT command; its record says "trigger": "command". Prints the result \
            and the readings; exit status 1 when the poll failed or was refused, 77 when you may not steer.
            """
    )

    @Argument(help: ArgumentHelp("The device's name.", valueName: "device"))
    var device: String

    @Flag(name: .long, help: "The result as one JSON object.")
    var json = false

    @OptionGroup var bus: BusOptions

    func run() async throws {
        ignoreBrokenPipes()
        let reply = try await ControlClient(bus: bus.resolved).call(
            "PollNow", [.string(device)], timeout: .seconds(300))
        guard let record = reply.first else { throw ExitCode(ControlClient.unavailable) }
        let fields = record.fields
        writeOut(json ? record.json + "\n" : StatusView.pollResult(fields))
        if fields["result"]?.stringValue == "failed" { throw ExitCode(1) }
    }
}

/// `keepalive interval DEVICE 2m`: change a device's interval in the running daemon.
struct IntervalCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "interval",
        abstract: "Change a device's polling interval until the daemon restarts (root and the keepalive group).",
        discussion: """
            Not below the device's floor (min_interval, 30 s unless configured). Prints the interval in force, \
            which low power may stretch.
            """
    )

    @Argument(help: ArgumentHelp("The device's name.", valueName: "device"))
    var device: String

    @Argument(help: ArgumentHelp("The new interval: 90s, 2m, 1h.", valueName: "interval"))
    var interval: DurationArgument

    @OptionGroup var bus: BusOptions

    func run() async throws {
        ignoreBrokenPipes()
        let milliseconds = UInt64(
            clamping: interval.duration.components.seconds * 1000
                + interval.duration.components.attoseconds / 1_000_000_000_000_000)
        let reply = try await ControlClient(bus: bus.resolved).call(
            "SetInterval", [.string(device), .uint64(milliseconds)])
        guard case .uint64(let effective)? = reply.first else { throw ExitCode(ControlClient.unavailable) }
        let inForce = Duration.milliseconds(Int64(clamping: effective)).compact
        writeOut(
            "\(device): every \(interval.duration.compact)"
                + (inForce == interval.duration.compact ? "\n" : " (\(inForce) in force: low power)\n"))
    }
}

/// `keepalive pause DEVICE` and `keepalive resume DEVICE`.
struct PauseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Stop polling a device until resumed (root and the keepalive group).",
        discussion: """
            Nothing connects to a paused device: its ticks write no record and a poll on command is refused. For a \
            battery change or a sensor taken away. Lasts until `keepalive resume` or the daemon restarts.
            """
    )

    @Argument(help: ArgumentHelp("The device's name.", valueName: "device"))
    var device: String

    @OptionGroup var bus: BusOptions

    func run() async throws {
        ignoreBrokenPipes()
        let reply = try await ControlClient(bus: bus.resolved).call("Pause", [.string(device)])
        writeOut("\(device): \(reply.first?.boolValue == false ? "already paused" : "paused")\n")
    }
}

struct ResumeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Poll a paused device again, from its next tick (root and the keepalive group)."
    )

    @Argument(help: ArgumentHelp("The device's name.", valueName: "device"))
    var device: String

    @OptionGroup var bus: BusOptions

    func run() async throws {
        ignoreBrokenPipes()
        let reply = try await ControlClient(bus: bus.resolved).call("Resume", [.string(device)])
        writeOut("\(device): \(reply.first?.boolValue == false ? "was not paused" : "resumed")\n")
    }
}
