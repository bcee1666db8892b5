public import KeepAlive
extension PollEngine {
    /// Why a poll asked for by a command did not happen.
    public struct CommandError: Error, Sendable, Hashable, CustomStringConvertible {
        public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
            public let rawValue: String
            public init(rawValue: String) { self.rawValue = rawValue }
            public var description: String { rawValue }

            /// No device of that name.
            public static let unknownDevice = Code(rawValue: "unknownDevice")
            /// The ledger is closed: shutting down, or the host is going to sleep.
            public static let refused = Code(rawValue: "refused")
            /// The device is shared by a fleet and another gateway holds it now (``PollAdmission``).
            public static let notHeld = Code(rawValue: "notHeld")
            /// Its operator paused the device (``PollAdmissionDecision/paused``): nothing connects to it until resumed.
            public static let paused = Code(rawValue: "paused")
        }

        public var code: Code
        public var message: String
        public var description: String { "\(code): \(message)" }
    }

    /// Polls `device` now, outside its grid: in a window of its own (the device's budget), under the connection
    /// limit, after a poll of it in progress (never two at once). The record goes to ``records()`` and `onRecord`
    /// like every other, with ``PollRecord/trigger`` `.command`, and is returned.
    public func pollNow(_ device: String) async throws(CommandError) -> PollRecord {
        guard let polled = devices[device] else {
            throw CommandError(code: .unknownDevice, message: "no device named `\(device)`")
        }
        let spec = polled.spec
        let interval = spec.interval ?? keepAlive.configuration.interval
        let budget = spec.budget ?? keepAlive.configuration.budget(forInterval: interval)
        let fired = keepAlive.time.now
        let transport = self.transport
        let name = "\(device) (command)"
        var outcome: PollOutcome
        var windowID = BackgroundTaskID.invalid
        do {
            (outcome, windowID) = try await keepAlive.ledger.withBackgroundTask(name: name, budget: budget) { window in
                let outcome = await withTaskExecutorPreference(transport.preferredExecutor) {
                    await self.poll(polled, in: window)
                }
                return (outcome, window.id)
            }
        } catch let error as BackgroundTaskError where error.code == .refused {
            throw CommandError(code: .refused, message: "the ledger is closed (shutting down or going to sleep)")
        } catch {
            outcome = PollOutcome(result: .failed(error))
        }
        if outcome.paused {
            throw CommandError(code: .paused, message: "`\(device)` is paused (resume it first)")
        }
        if outcome.declined {
            throw CommandError(code: .notHeld, message: "`\(device)` is shared and another gateway holds it now")
        }
        let window =
            keepAlive.ledger.history(named: name).last { $0.id == windowID }
            ?? BackgroundTaskRecord(
                id: windowID, name: name, began: fired, ended: keepAlive.time.now, budget: budget, outcome: .forcedEnd)
        let tick = token(of: device).map { keepAlive.lastTick(of: $0) } ?? 0
        let record = record(
            of: spec, outcome: outcome, window: window, tick: tick, scheduled: fired, fired: fired,
            interval: keepAlive.effectiveInterval ?? interval, power: keepAlive.powerState, trigger: .command
        )
        publish(record)
        return record
    }

    /// Where `device`'s ticks stand in the scheduler now (interval, next tick, backoff), or `nil` for an unknown
    /// device.
    public func schedule(of device: String) -> KeepAlive.RegistrationStatus? {
        token(of: device).flatMap { keepAlive.status(of: $0) }
    }

    /// Changes `device`'s interval at once (`KeepAlive.setInterval(_:for:)`); returns the effective interval.
    @discardableResult
    public func setInterval(_ interval: Duration, forDevice device: String) throws(ConfigurationValueError) -> Duration?
    {
        guard let token = token(of: device) else {
            throw ConfigurationValueError(field: "PollEngine.setInterval", reason: "no device named `\(device)`")
        }
        return try keepAlive.setInterval(interval, for: token)
    }
}
