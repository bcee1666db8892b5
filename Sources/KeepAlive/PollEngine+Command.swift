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
        }

        public var code: Code
        public var message: String
        public var description: String { "\(code): \(message)" }
    }

    /// Polls `device` now, outside its grid: in a window of its own (the device's budget), under the connection
    /// limit, after a poll of it in progress (never two at once). The record goes to ``records()`` and `onRecord`
    /// like every other, with ``PollRecord/trigger`` `.command`, and is returned.
    public func pollNow(_ device: String) async throws(CommandError) -> PollRecord {
        guard let spec = peripherals.first(where: { $0.name == device }), let deviceScratch = scratch[device] else {
            throw CommandError(code: .unknownDevice, message: "no device named `\(device)`")
        }
        // A scratch of its own: the grid's report of a tick reads the device's scratch after its poll ends, and
        // a command's poll may start right then.
        let commandScratch = PollScratch(spec: spec)
        commandScratch.adoptPresentations(of: deviceScratch)
        let interval = spec.interval ?? keepAlive.configuration.interval
        let budget = spec.budget ?? keepAlive.configuration.budget(forInterval: interval)
        let fired = keepAlive.time.now
        let transport = self.transport
        let name = "\(device) (command)"
        let result: PollResult
        var windowID = BackgroundTaskID.invalid
        do {
            (result, windowID) = try await keepAlive.ledger.withBackgroundTask(name: name, budget: budget) { window in
                let result = await withTaskExecutorPreference(transport.preferredExecutor) {
                    await self.poll(in: window, scratch: commandScratch)
                }
                return (result, window.id)
            }
        } catch let error as BackgroundTaskError where error.code == .refused {
            throw CommandError(code: .refused, message: "the ledger is closed (shutting down or going to sleep)")
        } catch {
            result = .failed(error)
        }
        let window = keepAlive.ledger.history(named: name).last { $0.id == windowID }
            ?? BackgroundTaskRecord(id: windowID, name: name, began: fired, ended: keepAlive.time.now, budget: budget, outcome: .forcedEnd)
        let snapshot = commandScratch.snapshot(tick: 0)
        if snapshot.declined {
            throw CommandError(code: .notHeld, message: "`\(device)` is shared and another gateway holds it now")
        }
        var record = PollRecord(
            device: device, peripheral: spec.peripheral, tick: deviceScratch.lastTick, scheduled: fired, fired: fired,
            result: .failed, values: snapshot.values, notifications: snapshot.notifications,
            window: PollRecord.Window(id: window.id, budget: window.budget, used: window.used, outcome: window.outcome),
            attempts: snapshot.attempts, interval: keepAlive.effectiveInterval ?? interval, power: keepAlive.powerState,
            trigger: .command
        )
        record.holder = snapshot.holder
        if let holder = snapshot.holder { record.peripheral.adapter = holder.adapter }
        record.readings = spec.readings(values: snapshot.values, notifications: snapshot.notifications, presentations: commandScratch.presentations)
        switch result {
        case .newData: record.result = .newData
        case .noData: record.result = .noData
        case .failed(let error): record.failure = Self.failure(error, snapshot: snapshot, window: window)
        }
        onRecord?(record)
        broadcast.publish(record)
        return record
    }

    /// Changes `device`'s interval at once (``KeepAlive/setInterval(_:for:)``); returns the effective interval.
    @discardableResult
    public func setInterval(_ interval: Duration, forDevice device: String) throws(ConfigurationValueError) -> Duration? {
        guard let token = tokensByName[device] else {
            throw ConfigurationValueError(field: "PollEngine.setInterval", reason: "no device named `\(device)`")
        }
        return try keepAlive.setInterval(interval, for: token)
    }
}
