public import KeepAlive
public import Logging
public import ServiceLifecycle
import Basics

/// Several power sources as one: the most severe of their states (`.critical` over `.lowPower` over
/// `.normal`), unless a manual override is set, which wins.
///
/// ``state`` is computed from the sources' own cached states whenever it is read. ``updates()`` yields each
/// change of that combined value (never the same value twice in a row) while ``run()`` runs: `run()` follows
/// every source's updates and the override, and also runs each source that is itself a `Service` (UPower,
/// power profiles, sysfs) — so a daemon runs the combined source, not its parts. It returns on cancellation or
/// graceful shutdown and throws the first error a part throws (UPower's, when the bus connection is lost),
/// after cancelling the others.
///
/// ```swift
/// let manual = ManualPowerSource()
/// let power = CombinedPowerSource([upower, profiles], override: manual, logger: logger)
/// let keepAlive = KeepAlive(configuration: configuration, powerSource: power, logger: logger)
/// let group = ServiceGroup(services: [power, keepAlive], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
public final class CombinedPowerSource: PowerSource, Service {
    public let sources: [any PowerSource]
    public let override: ManualPowerSource?
    private let logger: Logger
    private let cell: PowerStateCell
    /// Serialises compute-then-publish, so a stale combination never overtakes a newer one.
    private let combining = Locked(0)

    public init(
        _ sources: [any PowerSource], override: ManualPowerSource? = nil,
        logger: Logger = Logger(label: "keepalive.power")
    ) {
        self.sources = sources
        self.override = override
        self.logger = logger
        cell = PowerStateCell(Self.combine(sources, override: override))
    }

    public var state: PowerState {
        Self.combine(sources, override: override)
    }

    public func updates() -> AsyncStream<PowerState> {
        cell.subscribe()
    }

    /// Runs the parts that are services and follows every part until cancelled or shut down gracefully.
    public func run() async throws {
        try await cancelWhenGracefulShutdown { [self] in
            try await follow()
        }
    }

    private func follow() async throws {
        // Subscribe before combining, so a change between the two is never lost.
        let streams = sources.map { $0.updates() }
        let overrides = override?.overrideChanges()
        recombine()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for source in sources {
                guard let service = source as? any Service else { continue }
                group.addTask { try await service.run() }
            }
            for stream in streams {
                group.addTask { [self] in
                    for await _ in stream { recombine() }
                }
            }
            if let overrides {
                group.addTask { [self] in
                    for await _ in overrides { recombine() }
                }
            }
            do {
                while try await group.next() != nil {}
            } catch {
                logger.error("a power source failed; power state no longer followed", metadata: ["error": "\(error)"])
                throw error
            }
        }
    }

    private func recombine() {
        combining.withLock { count in
            count += 1
            let previous = cell.state
            let current = state
            guard cell.set(current) else { return }
            // The parts log their own changes with the reason; only an override is news here.
            let overridden = override?.override != nil
            logger.log(
                level: overridden ? .info : .debug, "power state \(current.rawValue)",
                metadata: [
                    "previous": "\(previous.rawValue)", "source": "\(overridden ? "manual override" : "combined")",
                ])
        }
    }

    static func combine(_ sources: [any PowerSource], override: ManualPowerSource?) -> PowerState {
        if let manual = override?.override { return manual }
        return sources.map(\.state).max() ?? .normal
    }
}
