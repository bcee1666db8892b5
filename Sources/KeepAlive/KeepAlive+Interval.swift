extension KeepAlive {
    /// Changes a registration's interval (before low-power stretching) at once: its next deadline is recomputed
    /// from its last tick and fires now if that is already past, as a power change does. A budget derived from the
    /// interval follows it; a budget given at registration stays and must still be shorter. Returns the effective
    /// interval (stretched in low power; `nil` while paused).
    ///
    /// - Throws: ``ConfigurationValueError`` when the interval is not positive, the registration's budget is not
    ///   shorter than it, or the token is unknown.
    @discardableResult
    public func setInterval(_ interval: Duration, for token: RegistrationToken) throws(ConfigurationValueError)
        -> Duration?
    {
        let field = "KeepAlive.setInterval"
        guard interval > .zero else {
            throw ConfigurationValueError(
                field: field, reason: "the interval must be positive, not \(interval.compact)")
        }
        let now = time.now
        let jitterLimit = configuration.jitter
        let outcome: Result<Duration?, ConfigurationValueError> = state.withLock { state in
            guard var registration = state.registrations[token] else {
                return .failure(ConfigurationValueError(field: field, reason: "no registration \(token)"))
            }
            let budget = registration.explicitBudget ? registration.budget : configuration.budget(forInterval: interval)
            do throws(ConfigurationValueError) {
                try Configuration.validate(budget: budget, interval: interval, field: "\(field).budget")
            } catch {
                return .failure(error)
            }
            guard jitterLimit < interval else {
                return .failure(
                    ConfigurationValueError(
                        field: field, reason: "\(interval.compact) is not longer than the jitter \(jitterLimit.compact)"
                    ))
            }
            registration.baseInterval = interval
            registration.budget = budget
            let effective = configuration.lowPower.effectiveInterval(interval, in: state.power)
            if var schedule = registration.schedule {
                schedule.change(interval: effective, now: now) { state.jitter(upTo: jitterLimit) }
                registration.schedule = schedule
            }
            state.registrations[token] = registration
            return .success(effective)
        }
        let effective = try outcome.get()
        logger.info("interval changed", metadata: ["token": "\(token)", "interval": "\(interval.compact)"])
        alarm.ring()
        return effective
    }

    /// Places registrations on their grids: each ticks on `start + phase + k·interval` from now on (`start`: when
    /// the scheduler started, the origin every phase is measured from), with whatever interval it ticks at, also
    /// after a change of interval, power or a sleep. The first tick after the change is the first grid point a
    /// whole interval or more after the last tick: never sooner than the interval, once later. Set before ``run()``,
    /// phases apply from the second tick (the first fires at start). Unknown tokens are ignored (unregistered
    /// meanwhile). The poll engine uses it to keep the links of devices sharing an adapter apart.
    package func align(_ phases: [(token: RegistrationToken, phase: Duration)]) {
        let now = time.now
        let jitterLimit = configuration.jitter
        state.withLock { state in
            for (token, phase) in phases {
                guard var registration = state.registrations[token] else { continue }
                registration.phase = phase
                if let epoch = state.epoch {
                    registration.schedule?.align(to: epoch + phase, now: now) { state.jitter(upTo: jitterLimit) }
                }
                state.registrations[token] = registration
            }
        }
        alarm.ring()
    }

    /// The grid point a registration ticks at next (no jitter), `nil` while paused or unknown: for tests and the
    /// placement's own checks.
    package func nextGridPoint(of token: RegistrationToken) -> KeepAliveInstant? {
        state.withLock { $0.registrations[token]?.schedule?.nextGrid }
    }
}
