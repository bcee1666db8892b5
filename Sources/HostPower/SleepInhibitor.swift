public import DBus
public import Logging
public import ServiceLifecycle
import Basics

/// Ties the host's sleep to the daemon through logind: while it runs it holds a *delay* sleep inhibitor
/// (`Inhibit("sleep", who, why, "delay")`), so a suspend waits (up to logind's `InhibitDelayMaxSec`, 5 s by
/// default) until the work is put away.
///
/// On `PrepareForSleep(true)` it calls `prepare` (close the ledger, end open windows, drop links), then closes the
/// inhibitor's descriptor, which lets the suspend go on. On `PrepareForSleep(false)` it takes a new inhibitor
/// and calls `resume` (reopen the ledger, poll now). Without logind on the bus it logs that once and does
/// nothing else.
///
/// ```swift
/// let sleep = SleepInhibitor(connection: systemBus, logger: logger,
///     prepare: { await keepAlive.prepareForSleep(); await engine.waitUntilDisconnected() },
///     resume: { keepAlive.resumeAfterSleep() })
/// try await sleep.run()   // in a ServiceGroup, or a task that is cancelled on shutdown
/// ```
public final class SleepInhibitor: Service {
    public static let busName = "org.freedesktop.login1"
    public static let path: ObjectPath = "/org/freedesktop/login1"
    public static let interface = "org.freedesktop.login1.Manager"

    /// What happened, for tests and the daemon's statistics.
    public struct Statistics: Sendable, Hashable {
        public var inhibitorsTaken = 0
        public var sleeps = 0
        public var wakes = 0
        /// From `PrepareForSleep(true)` to the inhibitor's release, the last time.
        public var lastReleaseDelay: Duration?
    }

    private let connection: DBusConnection
    private let why: String
    private let prepareBound: Duration
    private let logger: Logger
    private let prepare: @Sendable () async -> Void
    private let resume: @Sendable () async -> Void
    private let inhibitor = Locked<UnixFileDescriptor?>(nil)
    private let counters = Locked(Statistics())

    /// `prepareBound` caps `prepare`: the inhibitor is released when it returns or when the bound passes,
    /// whichever is first, so the host is never held past logind's own delay limit (default 5 s).
    public init(
        connection: DBusConnection,
        why: String = "ending BLE polls and disconnecting before sleep",
        prepareBound: Duration = .milliseconds(4_500),
        logger: Logger,
        prepare: @escaping @Sendable () async -> Void,
        resume: @escaping @Sendable () async -> Void
    ) {
        self.connection = connection
        self.why = why
        self.prepareBound = prepareBound
        self.logger = logger
        self.prepare = prepare
        self.resume = resume
    }

    public var statistics: Statistics { counters.withLock { $0 } }

    /// Whether an inhibitor is held right now.
    public var isHoldingInhibitor: Bool { inhibitor.withLock { $0?.rawValue != nil } }

    public func run() async throws {
        // Listen first: a PrepareForSleep between taking the inhibitor and subscribing must not be missed.
        let signals: AsyncThrowingStream<DBusSignal, any Error>
        do {
            signals = try await connection.signals(
                matching: MatchRule(
                    sender: Self.busName, path: Self.path, interface: Self.interface, member: "PrepareForSleep"))
        } catch {
            logger.warning(
                "cannot follow logind's PrepareForSleep: sleep is not tracked", metadata: ["error": "\(error)"])
            return
        }
        guard await takeInhibitor() else {
            logger.info("logind is not on the bus: sleep is not tracked (no inhibitor)")
            return
        }
        defer { releaseInhibitor() }
        try await cancelWhenGracefulShutdown {
            for try await signal in signals {
                guard case .boolean(let sleeping)? = signal.arguments.first else { continue }
                if sleeping {
                    await self.goingToSleep()
                } else {
                    await self.wokeUp()
                }
            }
        }
    }

    private func goingToSleep() async {
        let clock = ContinuousClock()
        let started = clock.now
        logger.info("the host is going to sleep: ending open windows and disconnecting")
        let prepare = self.prepare
        let finished = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await prepare()
                return true
            }
            group.addTask { [prepareBound] in
                try? await Task.sleep(for: prepareBound)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        releaseInhibitor()
        let delay = clock.now - started
        counters.withLock {
            $0.sleeps += 1
            $0.lastReleaseDelay = delay
        }
        if finished {
            logger.info("sleep inhibitor released", metadata: ["afterMilliseconds": "\(delay.milliseconds)"])
        } else {
            logger.warning(
                "sleep inhibitor released before the work was put away (bound reached)",
                metadata: ["afterMilliseconds": "\(delay.milliseconds)"])
        }
    }

    private func wokeUp() async {
        logger.info("the host woke up: polling again")
        _ = await takeInhibitor()
        counters.withLock { $0.wakes += 1 }
        await resume()
    }

    /// Takes a delay inhibitor; false when logind is not there (or refuses).
    private func takeInhibitor() async -> Bool {
        do {
            let reply = try await connection.call(
                destination: Self.busName, path: Self.path, interface: Self.interface, method: "Inhibit",
                arguments: [.string("sleep"), .string("keepalive"), .string(why), .string("delay")],
                timeout: .seconds(5))
            guard case .unixFileDescriptor(let descriptor)? = reply.first else {
                logger.warning("logind's Inhibit returned no descriptor: sleep is not tracked")
                return false
            }
            let previous = inhibitor.withLock { held in
                defer { held = descriptor }
                return held
            }
            previous?.close()
            counters.withLock { $0.inhibitorsTaken += 1 }
            return true
        } catch {
            logger.info("no sleep inhibitor from logind", metadata: ["error": "\(error)"])
            return false
        }
    }

    private func releaseInhibitor() {
        inhibitor.withLock { held in
            defer { held = nil }
            return held
        }?.close()
    }
}
