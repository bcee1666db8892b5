extension KeepAlive {
    /// Where one registration stands now: what a status page or an "explain" shows of it.
    public struct RegistrationStatus: Sendable, Hashable {
        public var name: String
        /// The interval asked for (at registration, or by ``KeepAlive/setInterval(_:for:)`` since).
        public var interval: Duration
        /// The interval it ticks at now: ``interval`` stretched in low power; `nil` while paused (critical power).
        public var effectiveInterval: Duration?
        /// The power state that made ``effectiveInterval``.
        public var power: PowerState
        /// When its next tick fires (`nil` before the scheduler starts, while paused, or once finished).
        public var nextFire: KeepAliveInstant?
        /// Its work is running now (a tick that comes meanwhile is skipped as an overlap).
        public var inFlight: Bool
        /// Failed ticks in a row (reset by a success).
        public var consecutiveFailures: Int
        /// Until when its ticks are skipped after those failures (`nil`: not backing off).
        public var backoffUntil: KeepAliveInstant?

        public init(
            name: String, interval: Duration, effectiveInterval: Duration?, power: PowerState,
            nextFire: KeepAliveInstant?, inFlight: Bool = false, consecutiveFailures: Int = 0,
            backoffUntil: KeepAliveInstant? = nil
        ) {
            self.name = name
            self.interval = interval
            self.effectiveInterval = effectiveInterval
            self.power = power
            self.nextFire = nextFire
            self.inFlight = inFlight
            self.consecutiveFailures = consecutiveFailures
            self.backoffUntil = backoffUntil
        }
    }

    /// Where the registration stands now, or `nil` for an unknown token.
    public func status(of token: RegistrationToken) -> RegistrationStatus? {
        let now = time.now
        return state.withLock { state in
            guard let registration = state.registrations[token] else { return nil }
            let effective = configuration.lowPower.effectiveInterval(registration.baseInterval, in: state.power)
            return RegistrationStatus(
                name: registration.name, interval: registration.baseInterval, effectiveInterval: effective,
                power: state.power,
                nextFire: registration.isFinished || effective == nil ? nil : registration.schedule?.nextFire,
                inFlight: registration.inFlight, consecutiveFailures: registration.consecutiveFailures,
                backoffUntil: registration.backoffUntil.flatMap { $0 > now ? $0 : nil })
        }
    }
}
