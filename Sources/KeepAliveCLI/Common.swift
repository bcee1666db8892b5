import ArgumentParser
import CLinux
import DBus
import KeepAliveDaemon
import Logging
import ServiceLifecycle

#if canImport(Glibc)
    import Glibc
#endif

/// `--bus`: which D-Bus to find BlueZ on.
struct BusOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            """
                The bus BlueZ is on: `system` (default; honours DBUS_SYSTEM_BUS_ADDRESS), `session`, or a D-Bus \
                address such as unix:path=/run/dbus/system_bus_socket or tcp:host=127.0.0.1,port=7000.
                """,
            valueName: "address"
        )
    )
    var bus: String?

    var resolved: DBusConnection.Bus {
        switch bus {
        case nil, "system": .system
        case "session": .session
        case let address?: .address(address)
        }
    }

    func validate() throws {
        if let bus, bus != "system", bus != "session", !bus.contains(":") {
            throw ValidationError(
                """
                    --bus '\(bus)' is not a D-Bus address (like unix:path=/run/dbus/system_bus_socket), `system` or \
                    `session`
                    """
            )
        }
    }
}

/// `--log-level`.
struct LoggingOptions: ParsableArguments {
    @Option(name: .long, help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = LogLevelArgument(.info)

    /// `repeats`: thin warnings that repeat every tick (the daemon's).
    func bootstrap(repeats: RepeatedWarnings? = nil) {
        let level = logLevel.level
        LoggingSystem.bootstrap { label in DaemonLogHandler(label: label, level: level, repeats: repeats) }
    }
}

/// A swift-log level as an argument.
struct LogLevelArgument: ExpressibleByArgument, Sendable {
    var level: Logger.Level

    init(_ level: Logger.Level) { self.level = level }

    init?(argument: String) {
        guard let level = Logger.Level(rawValue: argument) else { return nil }
        self.level = level
    }

    var defaultValueDescription: String { level.rawValue }
    static var allValueStrings: [String] { Logger.Level.allCases.map(\.rawValue) }
}

/// A duration argument: `500ms`, `10s`, `2m`.
struct DurationArgument: ExpressibleByArgument, Sendable {
    var duration: Duration

    init(_ duration: Duration) { self.duration = duration }

    init?(argument: String) {
        guard let duration = ConfigurationLoader.parseDuration(argument), duration > .zero else { return nil }
        self.duration = duration
    }

    var defaultValueDescription: String { duration.compact }
}

/// Writes to a descriptor directly: progress lines must not sit in a stdio buffer.
func writeOut(_ text: String, to descriptor: Int32 = STDOUT_FILENO) {
    ProcessIO.write(text, to: descriptor)
}

/// Whether standard output is a terminal (tables and colour) or a pipe (JSON lines, no escapes).
var standardOutputIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

/// Ignores SIGPIPE (a closed pipe is then an EPIPE error we report, not a silent death).
func ignoreBrokenPipes() {
    signal(SIGPIPE, SIG_IGN)
}

/// One malloc arena. Without a limit glibc keeps up to eight per core, and the daemon's RSS crept up by
/// fragmentation over an hour's soak; two flattened it (Benchmarks/NOTES.md has the soak's figures), and one
/// takes another 7–14 MiB off the peak at 10,000 devices, where the tree's objects are made on the connection's
/// thread and the polls' on the executor's (95–100 MiB with two, 86–89 with one, same run to run). The
/// daemon's threads take most small blocks from their per-thread caches, so the one arena's lock is rarely
/// contended. Called from the ELF constructor that installs the executors, before any other thread exists:
/// a thread that allocated before the limit would keep an arena of its own.
func limitMallocArenas() {
    _ = clinux_limit_malloc_arenas(1)
}

/// Runs `group` to its end; the first SIGTERM or SIGINT shuts it down gracefully (later ones are ignored, as
/// ServiceLifecycle does). The signals come through `ProcessIO.signals`, not ServiceLifecycle's own handling:
/// that uses libdispatch's signal sources, which start libdispatch's workqueue, and its monitor would wake the
/// daemon every second between ticks.
///
/// `signals`: from `shutdownSignals()`, taken before the command says it is starting, so that a SIGTERM sent as
/// soon as it has said so is caught (a ThreadSanitizer run sent it between the two and the default action killed
/// the daemon); one that comes before `run` is remembered by ServiceGroup.
func runUntilSignalled(
    _ group: ServiceGroup, signals: (stream: AsyncStream<Int32>, cancel: @Sendable () -> Void), logger: Logger
) async throws {
    let (signals, stopSignals) = signals
    defer { stopSignals() }
    let watcher = Task {
        for await number in signals {
            logger.info("received \(number == SIGINT ? "SIGINT" : "SIGTERM"): shutting down gracefully")
            await group.triggerGracefulShutdown()
            break
        }
    }
    defer { watcher.cancel() }
    try await group.run()
}

/// SIGTERM and SIGINT as a stream, caught from now on: for `runUntilSignalled`.
func shutdownSignals() -> (stream: AsyncStream<Int32>, cancel: @Sendable () -> Void) {
    ProcessIO.signals([SIGINT, SIGTERM])
}

/// Runs `body` until it returns or SIGINT/SIGTERM arrives, which cancels it (so `read` and `scan` still
/// disconnect and stop discovery on Ctrl-C). Returns the body's result, or `nil` when interrupted.
///
/// `caught` runs once the signals are caught: what tells a supervisor it may signal (`READY`) goes there, since a
/// SIGTERM before that point would end the process by its default action, with no clean stop and no exit 0.
func untilInterrupted<T: Sendable>(
    caught: () -> Void = {}, _ body: @escaping @Sendable () async throws -> T
) async throws -> T? {
    let (signals, stopSignals) = ProcessIO.signals([SIGINT, SIGTERM])
    defer { stopSignals() }
    caught()
    let work = Task { try await body() }
    let watcher = Task {
        var count = 0
        for await _ in signals {
            count += 1
            if count == 1 {
                work.cancel()  // the first: stop cleanly (disconnect, stop discovery)
            } else {
                writeOut("keepalive: interrupted again, exiting now\n", to: STDERR_FILENO)
                _exit(130)  // the second: the user means it
            }
        }
    }
    defer { watcher.cancel() }
    do {
        return try await work.value
    } catch is CancellationError {
        return nil
    }
}
