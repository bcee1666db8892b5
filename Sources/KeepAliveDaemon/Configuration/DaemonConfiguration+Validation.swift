import KeepAlive

extension DaemonConfiguration {
    /// The checks of the configuration file, for a configuration built in code: the scheduler's and the poll
    /// engine's own (``KeepAlive/ConfigurationValueError`` reasons), unique names, one entry per device and
    /// adapter, valid addresses and adapters, and every device's interval, budget and listening times.
    ///
    /// ``ConfigurationLoader`` runs the same checks (with the line and column of each value);
    /// ``Daemon/init(configuration:options:logger:)`` runs them again, so a configuration made in code fails
    /// there with a thrown error naming the field instead of trapping later.
    public func validate() throws(ConfigurationError) {
        let top = SourceLocation(file: path ?? "DaemonConfiguration", line: 0, column: 0)
        func invalid(_ error: ConfigurationValueError, field: String, at location: SourceLocation) -> ConfigurationError {
            ConfigurationError(.invalidValue, at: location, field: field, error.reason)
        }
        do {
            try keepAliveConfiguration.validate()
        } catch {
            throw invalid(error, field: Self.fileField(error.field), at: top)
        }
        guard (1...16).contains(maxConnections) else {
            throw ConfigurationError(.invalidValue, at: top, field: "max_connections", "must be from 1 to 16, not \(maxConnections)")
        }
        guard HostBluetooth.isValidAdapter(adapter) else {
            throw ConfigurationError(.invalidValue, at: top, field: "adapter", "`\(adapter)` is not an adapter name like hci0")
        }
        guard !devices.isEmpty else {
            throw ConfigurationError(.missingKey, at: top, field: "devices", "at least one device is needed")
        }
        let scheduler = keepAliveConfiguration
        var names: [String: Int] = [:]
        var entries: [String: Int] = [:]
        for (index, device) in devices.enumerated() {
            let field = "devices[\(index)]"
            let location = device.location ?? top
            if let first = names[device.name] {
                throw ConfigurationError(
                    .invalidValue, at: location, field: "\(field).name",
                    "the name `\(device.name)` is already used by devices[\(first)]: names must be unique"
                )
            }
            names[device.name] = index
            guard HostBluetooth.isValidAddress(device.address) else {
                throw ConfigurationError(
                    .badAddress, at: location, field: "\(field).address", "`\(device.address)` is not an address like AA:BB:CC:DD:EE:FF"
                )
            }
            let adapter = device.adapter ?? self.adapter
            guard HostBluetooth.isValidAdapter(adapter) else {
                throw ConfigurationError(.invalidValue, at: location, field: "\(field).adapter", "`\(adapter)` is not an adapter name like hci0")
            }
            let key = "\(device.address.uppercased())@\(adapter)"
            if let first = entries[key] {
                throw ConfigurationError(
                    .invalidValue, at: location, field: "\(field).address",
                    "\(device.address) on \(adapter) is already devices[\(first)]: one entry per device and adapter"
                )
            }
            entries[key] = index
            let interval = device.interval ?? self.interval
            if jitter >= interval {
                throw ConfigurationError(
                    .invalidValue, at: location, field: "\(field).interval",
                    "interval \(interval.compact) must be longer than jitter \(jitter.compact)"
                )
            }
            do {
                try KeepAlive.RegistrationOptions(interval: device.interval, budget: device.budget).validate(against: scheduler)
            } catch {
                let name = error.field.hasSuffix(".interval") ? "interval" : "budget"
                throw invalid(error, field: "\(field).\(name)", at: location)
            }
            let budget = device.budget ?? scheduler.budget(forInterval: interval)
            if budget >= interval {
                throw ConfigurationError(
                    .invalidValue, at: location, field: "\(field).interval",
                    "interval \(interval.compact) is not longer than the window budget \(budget.compact)"
                )
            }
            for (position, subscription) in device.notifications.enumerated() where subscription.duration >= budget {
                throw ConfigurationError(
                    .invalidValue, at: location, field: "\(field).notify[\(position)].for",
                    "listening \(subscription.duration.compact) must be shorter than the device's window budget \(budget.compact)"
                )
            }
            var readingNames: [String: BluetoothUUID] = [:]
            var characteristics = Set<BluetoothUUID>()
            for uuid in device.reads + device.notifications.map(\.characteristic) where characteristics.insert(uuid).inserted {
                if let problem = device.decoding[uuid]?.layout?.validate().first {
                    throw ConfigurationError(.invalidValue, at: location, field: "\(field).decoding[\(uuid.shortDescription)]", problem.message)
                }
                for (name, _) in DeviceProfile.expectedReadings(of: uuid, decoding: device.decoding[uuid]) {
                    if let first = readingNames[name] {
                        throw ConfigurationError(
                            .invalidValue, at: location, field: "\(field).decoding[\(uuid.shortDescription)]",
                            "the reading name `\(name)` is already given by \(first.shortDescription): each reading of a device needs its own name"
                        )
                    }
                    readingNames[name] = uuid
                }
            }
            if device.reads.isEmpty, device.writes.isEmpty, device.notifications.isEmpty {
                throw ConfigurationError(
                    .missingKey, at: location, field: field, "a device needs at least one of write, read or notify"
                )
            }
        }
        if let problem = fleetProblem() {
            let location = problem.device.flatMap { devices[$0].location } ?? fleet?.location ?? top
            throw ConfigurationError(.invalidValue, at: location, field: problem.field, problem.message)
        }
    }

    /// `KeepAlive.Configuration.windowBudget` → `window_budget`: the file's name for a core field.
    static func fileField(_ codeField: String) -> String {
        let names = [
            "KeepAlive.Configuration.interval": "interval",
            "KeepAlive.Configuration.jitter": "jitter",
            "KeepAlive.Configuration.windowBudget": "window_budget",
            "KeepAlive.Configuration.lowPower.lowPowerMultiplier": "low_power.multiplier",
            "KeepAlive.Configuration.lowPower.critical": "low_power.critical",
        ]
        return names[codeField] ?? codeField
    }
}
