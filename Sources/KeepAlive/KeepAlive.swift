public import Logging
public import ServiceLifecycle
import Basics

/// Fires periodic callbacks, each inside a bounded background window: the keep-alive timer of an iOS app's
/// background mode, for a Linux gateway.
///
/// The first tick fires at start, then on absolute deadlines `start + k·interval` (no drift). In low power the
/// interval stretches (default ×2), in critical power polling pauses; a change applies at once. A tick whose
/// previous callback is still running is skipped and counted, never stacked; after a suspend or a clock jump
/// at most one catch-up tick fires. Every tick of every registration ends in exactly one ``TickReport``.
///
/// ```swift
/// let keepAlive = KeepAlive(configuration: .init(interval: .seconds(30)), logger: logger)
/// let token = keepAlive.register(name: "greenhouse") { window in
///     do {
///         return try await sensor.poll(within: window.timeRemaining) ? .newData : .noData
///     } catch {
///         return .failed(error)
///     }
/// }
/// try await keepAlive.run()   // or keepAlive.start(), or put it in a ServiceGroup
/// ```
public final class KeepAlive: Service, Sendable {
    /// The instance app code can share, as with the seed's singleton. The library itself never uses it.
    public static let shared = KeepAlive(validated: Configuration())

    public let configuration: Configuration
    /// The ledger every window of this scheduler is kept in.
    public let ledger: BackgroundTaskLedger
    package let time: TimeBase
    let powerSource: any PowerSource
    let logger: Logger
    let state: Locked<SchedulerState>
    let alarm: Alarm
    let broadcast = Broadcast<KeepAliveEvent>()

    /// A scheduler; nothing fires until ``run()`` or ``start()``.
    ///
    /// - Throws: ``ConfigurationValueError`` naming the field when `configuration` cannot work (see
    ///   ``Configuration/validate()``).
    public convenience init(
        configuration: Configuration = Configuration(),
        clock: any Clock<Duration> = TimerFDClock(),
        powerSource: any PowerSource = FixedPowerSource(),
        randomNumberGenerator: any RandomNumberGenerator & Sendable = SystemRandomNumberGenerator(),
        logger: Logger = Logger(label: "keepalive")
    ) throws(ConfigurationValueError) {
        try configuration.validate()
        self.init(
            validated: configuration, clock: clock, powerSource: powerSource,
            randomNumberGenerator: randomNumberGenerator,
            logger: logger
        )
    }

    private init(
        validated configuration: Configuration,
        clock: any Clock<Duration> = TimerFDClock(),
        powerSource: any PowerSource = FixedPowerSource(),
        randomNumberGenerator: any RandomNumberGenerator & Sendable = SystemRandomNumberGenerator(),
        logger: Logger = Logger(label: "keepalive")
    ) {
        self.configuration = configuration
        self.time = TimeBase(clock)
        self.powerSource = powerSource
        self.logger = logger
        self.ledger = BackgroundTaskLedger(configuration: configuration.ledger, time: time, logger: logger)
        self.alarm = Alarm(time: time)
        self.state = Locked(SchedulerState(power: powerSource.state, random: randomNumberGenerator))
    }

    deinit {
        broadcast.finish()
    }

    // MARK: Registration

    /// Registers a callback that runs every tick in its own window; returns the token to unregister it.
    ///
    /// Several registrations run concurrently, each in its own window. After consecutive `.failed` results a
    /// registration backs off exponentially (capped, reset by a success). A registration added while the
    /// scheduler runs fires at once, then on its own grid. `onReport` is called once per tick with what
    /// happened, including skipped ticks.
    ///
    /// - Throws: ``ConfigurationValueError`` when `options` cannot work: a non-positive interval or budget, or a
    ///   budget not shorter than the interval the registration ticks at.
    @discardableResult
    public func register(
        name: String,
        options: RegistrationOptions = RegistrationOptions(),
        onReport: (@Sendable (TickReport) -> Void)? = nil,
        handler: @escaping @Sendable (PollWindow) async -> PollResult
    ) throws(ConfigurationValueError) -> RegistrationToken {
        try options.validate(against: configuration)
        return add(name: name, options: options, onReport: onReport) { window in LaunchResult(await handler(window)) }
    }

    /// A registration whose launches each wait for `gate`, in their window, before their task is made; the gate
    /// hands over the work to run (or declines the tick), so no handler is given here.
    @discardableResult
    package func register(
        name: String,
        options: RegistrationOptions = RegistrationOptions(),
        gate: any LaunchGate,
        onReport: (@Sendable (TickReport) -> Void)? = nil
    ) throws(ConfigurationValueError) -> RegistrationToken {
        try options.validate(against: configuration)
        return add(name: name, options: options, gate: gate, onReport: onReport, work: nil)
    }

    /// ``register(name:options:onReport:handler:)`` for options already checked.
    private func add(
        name: String,
        options: RegistrationOptions,
        gate: (any LaunchGate)? = nil,
        onReport: (@Sendable (TickReport) -> Void)?,
        work: LaunchWork?
    ) -> RegistrationToken {
        let now = time.now
        let token: RegistrationToken = state.withLock { state in
            let token = RegistrationToken(rawValue: state.nextToken)
            state.nextToken += 1
            let base = options.interval ?? configuration.interval
            var registration = Registration(
                token: token,
                name: name,
                baseInterval: base,
                budget: options.budget ?? configuration.budget(forInterval: base),
                work: work,
                onReport: onReport,
                maxTicks: options.maxTicks
            )
            registration.explicitBudget = options.budget != nil
            registration.gate = gate
            if state.isRunning {
                registration.schedule = RegistrationSchedule(
                    startingAt: now,
                    interval: configuration.lowPower.effectiveInterval(base, in: state.power)
                )
            }
            state.registrations[token] = registration
            return token
        }
        logger.debug("registered keep-alive callback", metadata: ["name": "\(name)", "token": "\(token)"])
        alarm.ring()
        return token
    }

    /// Removes a registration. A callback already running finishes in its window and is still reported.
    public func unregister(_ token: RegistrationToken) {
        let removed = state.withLock { $0.registrations.removeValue(forKey: token) }
        if let removed {
            logger.debug("unregistered keep-alive callback", metadata: ["name": "\(removed.name)"])
        } else {
            logger.notice("unregister called with an unknown token", metadata: ["token": "\(token)"])
        }
    }

    /// The seed's single callback: setting it registers a callback named `onKeepAliveCallback` that reports
    /// `.newData`; setting `nil` removes it.
    public var onKeepAliveCallback: (@Sendable () async -> Void)? {
        get { state.withLock { $0.seedCallback?.callback } }
        set {
            let old = state.withLock { state in
                defer { state.seedCallback = nil }
                return state.seedCallback?.token
            }
            if let old { unregister(old) }
            guard let callback = newValue else { return }
            // The default options: valid by construction.
            let token = add(name: "onKeepAliveCallback", options: RegistrationOptions(), onReport: nil) { _ in
                await callback()
                return LaunchResult(.newData)
            }
            state.withLock { $0.seedCallback = SeedCallback(token: token, callback: callback) }
        }
    }

    // MARK: Observing

    /// Everything the scheduler reports from now on, in order.
    public func events() -> AsyncStream<KeepAliveEvent> {
        broadcast.subscribe()
    }

    /// Counters since this instance was created.
    public var statistics: Statistics {
        state.withLock { $0.statistics }
    }

    /// The power state the scheduler currently applies.
    public var powerState: PowerState {
        state.withLock { $0.power }
    }

    /// The effective interval of the scheduler's own grid now (`nil` while paused).
    public var effectiveInterval: Duration? {
        let power = powerState
        return configuration.lowPower.effectiveInterval(configuration.interval, in: power)
    }

    /// When the next tick of any registration fires, if one is scheduled.
    public var nextDeadline: KeepAliveInstant? {
        state.withLock { state in
            state.registrations.values.lazy.filter { !$0.isFinished }.compactMap { $0.schedule?.nextFire }.min()
        }
    }

    /// The number of the registration's last tick that fired (0 before any): what a poll outside the grid is
    /// numbered after.
    package func lastTick(of token: RegistrationToken) -> UInt64 {
        state.withLock { state in state.registrations[token].map { $0.nextTick > 0 ? $0.nextTick - 1 : 0 } ?? 0 }
    }

    /// How many callbacks are registered (finished ones included, until unregistered).
    public var registrationCount: Int {
        state.withLock { $0.registrations.count }
    }

    public var isRunning: Bool {
        state.withLock { $0.isRunning }
    }

    /// Counters a gateway operator wants on a dashboard: every missed poll is in one of them.
    public struct Statistics: Sendable, Hashable {
        public var ticksFired: UInt64 = 0
        public var callbacksRun: UInt64 = 0
        public var skippedOverlap: UInt64 = 0
        public var skippedBackoff: UInt64 = 0
        public var refused: UInt64 = 0
        public var missedTicks: UInt64 = 0
        public var failures: UInt64 = 0
        public var forcedEnds: UInt64 = 0
        /// Ticks a registration's gate declined (another gateway's device): neither run nor failed.
        public var declined: UInt64 = 0
        /// Ticks whose window ended while the gate waited for what the others held (a connection slot): reported
        /// as failed, but not counted in ``failures`` and not toward backoff.
        public var contended: UInt64 = 0
    }
}
