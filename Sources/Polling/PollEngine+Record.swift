import KeepAlive
extension PollEngine {
    /// Turns the scheduler's report of one device's tick into its record and publishes it. A declined tick, and a
    /// skipped tick of a device another gateway holds, write none: their holder records them.
    func record(_ report: TickReport, device: PolledDevice) {
        let spec = device.spec
        // Placement follows what the scheduler reports: the interval in force, and whether the tick was ours.
        var declined = false
        if case .declined = report.outcome { declined = true }
        if configuration.placement {
            placement.observe(spec.name, interval: report.interval, active: !declined)
            let phases = placement.replanIfDue(at: keepAlive.time.now)
            if !phases.isEmpty { keepAlive.align(phases) }
        }
        let outcome: PollOutcome
        let window: BackgroundTaskRecord?
        switch report.outcome {
        case .declined:
            return
        case .skipped where admission.map({ !$0.records(spec.name) }) ?? false:
            return
        case .skipped(let reason):
            let message: String =
                switch reason {
                case .overlap: "tick skipped: the previous poll of this device is still running"
                case .backoff: "tick skipped: backing off after consecutive failures"
                case .refused: "tick skipped: the ledger is closed (shutting down or going to sleep)"
                }
            outcome = PollOutcome(result: .failed(KeepAliveError(code: .skipped, message: message)))
            window = nil
        case .ran(let result, let ranIn):
            // A window force-ended before its poll returned has only what the gate decided (the holder).
            var ran = report.detail as? PollOutcome ?? PollOutcome(result: result)
            ran.result = result
            outcome = ran
            window = ranIn
        }
        var record = record(
            of: spec, outcome: outcome, window: window, tick: report.tick, scheduled: report.scheduled,
            fired: report.fired, interval: report.interval, power: report.power, trigger: .schedule
        )
        if case .skipped(let reason) = report.outcome { record.skipReason = reason }
        publish(record)
    }

    /// The one place a ``PollRecord`` is made from a poll's outcome: scheduled ticks, skips and polls on command.
    func record(
        of spec: PeripheralSpec, outcome: PollOutcome, window: BackgroundTaskRecord?, tick: UInt64,
        scheduled: KeepAliveInstant, fired: KeepAliveInstant, interval: Duration, power: PowerState,
        trigger: PollRecord.Trigger
    ) -> PollRecord {
        var record = PollRecord(
            device: spec.name, peripheral: spec.peripheral, tick: tick, scheduled: scheduled, fired: fired,
            result: .failed, values: outcome.values, notifications: outcome.notifications, readings: outcome.readings,
            window: window.map { PollRecord.Window(id: $0.id, budget: $0.budget, used: $0.used, outcome: $0.outcome) },
            attempts: outcome.attempts, interval: interval, power: power, trigger: trigger
        )
        record.holder = outcome.holder
        record.busy = outcome.busy
        record.slotWait = outcome.slotWait
        record.link = outcome.link
        record.heard = outcome.heard
        if spec.isPassive { record.source = .advertisement }
        if let holder = outcome.holder { record.peripheral.adapter = holder.adapter }
        switch outcome.result {
        case .newData: record.result = .newData
        case .noData: record.result = .noData
        case .failed(let error): record.failure = Self.failure(error, window: window)
        }
        return record
    }

    /// Counts a record in the metrics, hands it to `onRecord`, then to the ``records()`` streams: every record
    /// passes here, and only here.
    func publish(_ record: PollRecord) {
        metrics.observe(record)
        if record.result == .failed {
            logger.debug(
                "poll record: failed",
                metadata: ["device": "\(record.device)", "code": "\(record.failure?.code ?? "?")"])
        }
        onRecord?(record)
        broadcast.publish(record)
    }

    /// A failure as the record states it: the scheduler's own errors by their code, a transport's timeout by what
    /// ended the window (its expiry, a cancellation).
    static func failure(_ error: any Error, window: BackgroundTaskRecord?) -> PollRecord.Failure {
        if let keepAliveError = error as? KeepAliveError {
            return PollRecord.Failure(
                code: keepAliveError.code.description, message: keepAliveError.message, transient: true)
        }
        let transportError = transportError(error)
        var code = transportError.code.rawValue
        if transportError.code == .timeout, let outcome = window?.outcome, outcome == .expired || outcome == .cancelled
        {
            code = outcome == .expired ? "windowExpired" : "cancelled"
        }
        return PollRecord.Failure(
            code: code, message: transportError.message, transient: transportError.isTransient,
            dbusName: transportError.dbusName
        )
    }
}
