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
}
