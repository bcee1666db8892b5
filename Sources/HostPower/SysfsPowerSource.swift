public import KeepAlive
public import Logging
public import ServiceLifecycle
import Basics

/// The host's power read from the kernel's `/sys/class/power_supply`, for hosts without UPower.
///
/// - a system battery (`type` Battery, `scope` not Device) `Discharging` while no mains supply (`type` Mains
///   or USB) is `online` → `.lowPower`;
/// - a battery discharging with the mean `capacity` of the system batteries at or below
///   ``criticalPercentage`` → `.critical` (even with mains online: a weak charger that cannot keep up);
/// - otherwise, and when the directory is missing or unreadable (one log line), `.normal`.
///
/// sysfs sends no change notification for these attributes, so the source polls: a `Service` whose ``run()``
/// reads once at start, then every ``pollInterval`` on the injected clock — but only while somebody is
/// subscribed to ``updates()`` (with nobody listening it parks without a timer, and reads at once when a
/// subscriber comes). `run()` returns on cancellation or graceful shutdown and never throws.
///
/// ```swift
/// let sysfs = SysfsPowerSource(pollInterval: .seconds(30), logger: logger)
/// let keepAlive = KeepAlive(configuration: configuration, powerSource: sysfs, logger: logger)
/// let group = ServiceGroup(services: [sysfs, keepAlive], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
public final class SysfsPowerSource: PowerSource, Service {
    public let root: String
    /// The mean battery capacity, in percent, at or below which a discharging host is `.critical`.
    public let criticalPercentage: Double
    public let pollInterval: Duration
    private let time: TimeBase
    private let logger: Logger
    private let cell = PowerStateCell()
    private let status = Locked(Status())

    private struct Status {
        var summary = "sysfs: not read yet"
        var problem: String?
        var reads = 0
        var idle = false
    }

    /// Nothing is read here: ``run()`` (or ``refresh()``) does.
    ///
    /// - Throws: ``KeepAlive/ConfigurationValueError`` when `pollInterval` is not positive.
    public convenience init(
        root: String = "/sys/class/power_supply", criticalPercentage: Double = 10,
        pollInterval: Duration = .seconds(30), clock: any Clock<Duration> = TimerFDClock(), logger: Logger
    ) throws(ConfigurationValueError) {
        guard pollInterval > .zero else {
            throw ConfigurationValueError(
                field: "SysfsPowerSource.pollInterval", reason: "must be positive, not \(pollInterval)")
        }
        self.init(
            root: root, criticalPercentage: criticalPercentage, validatedPollInterval: pollInterval, clock: clock,
            logger: logger)
    }

    init(
        root: String, criticalPercentage: Double, validatedPollInterval pollInterval: Duration,
        clock: any Clock<Duration>, logger: Logger
    ) {
        self.root = root
        self.criticalPercentage = criticalPercentage
        self.pollInterval = pollInterval
        self.time = TimeBase(clock)
        self.logger = logger
    }

    public var state: PowerState {
        cell.state
    }

    public func updates() -> AsyncStream<PowerState> {
        cell.subscribe()
    }

    /// The last reading in words: `sysfs: AC online, BAT0 87% Charging`.
    public var summary: String {
        status.withLock { $0.summary }
    }

    /// How many times the directory was read.
    public var readCount: Int {
        status.withLock { $0.reads }
    }

    /// Whether somebody follows ``updates()`` (the poller reads only then).
    package var hasSubscribers: Bool {
        cell.hasSubscribers
    }

    /// True while ``run()`` waits for a subscriber (no timer pending).
    package var isIdle: Bool {
        status.withLock { $0.idle }
    }

    /// Polls until cancelled or shut down gracefully.
    public func run() async throws {
        await cancelWhenGracefulShutdown { [self] in
            await poll()
        }
    }

    private func poll() async {
        refresh()
        while !Task.isCancelled {
            if !cell.hasSubscribers {
                status.withLock { $0.idle = true }
                await cell.waitForSubscriber()
                status.withLock { $0.idle = false }
                if Task.isCancelled { return }
                // The last reading may be old: a new subscriber gets changes from now on.
                refresh()
            }
            do {
                try await time.sleep(for: pollInterval)
            } catch {
                return
            }
            if cell.hasSubscribers { refresh() }
        }
    }

    /// Reads the directory now; updates ``state`` (telling subscribers when it changed) and returns it.
    @discardableResult
    public func refresh() -> PowerState {
        let verdict: PowerVerdict
        var problem: String?
        do {
            verdict = Self.verdict(try PowerSupply.list(root: root), criticalPercentage: criticalPercentage)
        } catch {
            problem = error.description
            verdict = PowerVerdict(state: .normal, reason: "sysfs: \(error.description)")
        }
        let (previousProblem, firstRead) = status.withLock { status in
            defer {
                status.summary = verdict.reason
                status.problem = problem
                status.reads += 1
            }
            return (status.problem, status.reads == 0)
        }
        // One line per problem, not one per poll.
        if let problem, problem != previousProblem {
            logger.warning("no power supplies readable: power state normal", metadata: ["reason": "\(problem)"])
        } else if problem == nil, let previousProblem {
            logger.info("power supplies readable again", metadata: ["root": "\(root)", "was": "\(previousProblem)"])
        }
        if cell.set(verdict.state) || firstRead {
            logger.info(
                "power state \(verdict.state.rawValue)", metadata: ["source": "sysfs", "reason": "\(verdict.reason)"])
        }
        return verdict.state
    }

    static func verdict(_ supplies: [PowerSupply], criticalPercentage: Double) -> PowerVerdict {
        let described =
            supplies.isEmpty ? "no mains supply or battery" : supplies.map(\.description).joined(separator: ", ")
        let reason = "sysfs: \(described)"
        let batteries = supplies.filter(\.isSystemBattery)
        guard batteries.contains(where: \.isDischarging) else { return PowerVerdict(state: .normal, reason: reason) }
        let capacities = batteries.compactMap(\.capacity)
        if !capacities.isEmpty, Double(capacities.reduce(0, +)) / Double(capacities.count) <= criticalPercentage {
            return PowerVerdict(state: .critical, reason: reason)
        }
        let mainsOnline = supplies.contains { $0.isMains && $0.online == true }
        return PowerVerdict(state: mainsOnline ? .normal : .lowPower, reason: reason)
    }
}
