import KeepAlive
import MQTTBridge
import Polling

#if canImport(Glibc)
    import Glibc
#endif

extension DaemonConfiguration {
    /// Where a value of a configuration file was written: its position, and the name an error gives it (a value a
    /// device took from a profile is named at the device's `profile:` key, with the profile's own line).
    public struct Origin: Sendable, Hashable {
        public var location: SourceLocation
        public var field: String

        public init(location: SourceLocation, field: String) {
            self.location = location
            self.field = field
        }
    }

    /// Every rule a configuration must keep, in one place: the scheduler's and the poll engine's own
    /// (``KeepAlive/ConfigurationValueError`` reasons), unique names, one entry per device and adapter, valid
    /// addresses and adapters, every device's interval (no shorter than its floor, `min_interval`), budget and
    /// listening times, one name per reading, and the fleet's settings.
    ///
    /// ``ConfigurationLoader`` checks only the file's shape and each value's own form, then calls this: an error
    /// then points at the line and column of the value that breaks the rule (``origins``).
    /// ``Daemon/init(configuration:options:logger:)`` calls it too, so a configuration made in code fails there
    /// with an error naming the field instead of trapping later.
    public func validate() throws(ConfigurationError) {
        let top = SourceLocation(file: path ?? "DaemonConfiguration", line: 0, column: 0)
        /// The error for `field`, where the file wrote it (else at `fallback`, else the top).
        func refuse(
            _ field: String, at fallback: SourceLocation? = nil, kind: ConfigurationError.Kind = .invalidValue,
            _ message: String
        ) -> ConfigurationError {
            let origin = origins[field]
            return ConfigurationError(
                kind, at: origin?.location ?? fallback ?? top, field: origin?.field ?? field, message)
        }
        let intervalNote = origins["interval"].map { " (line \($0.location.line))" } ?? " (the default)"
        if jitter >= interval, interval > .zero, origins["jitter"] != nil {
            throw refuse(
                "jitter", "jitter \(jitter.compact) must be shorter than interval \(interval.compact)\(intervalNote)")
        }
        if let windowBudget, windowBudget >= interval, interval > .zero, origins["window_budget"] != nil {
            throw refuse(
                "window_budget",
                """
                window_budget \(windowBudget.compact) must be shorter than interval \
                \(interval.compact)\(intervalNote), 
                """
                    + "so that each tick's windows close before the next tick"
            )
        }
        do {
            try keepAliveConfiguration.validate()
        } catch {
            let field = Self.fileField(error.field)
            throw refuse(field, error.reason)
        }
        guard minInterval > .zero else {
            throw refuse("min_interval", "must be longer than 0, e.g. 5s")
        }
        guard (1...16).contains(maxConnections) else {
            throw refuse("max_connections", "must be from 1 to 16, not \(maxConnections)")
        }
        guard HostBluetooth.isValidAdapter(adapter) else {
            throw refuse("adapter", "`\(adapter)` is not an adapter name like hci0")
        }
        guard !devices.isEmpty else {
            throw refuse("devices", kind: .missingKey, "at least one device is needed")
        }
        let scheduler = keepAliveConfiguration
        var names: [String: Int] = [:]
        var entries: [String: Int] = [:]
        // With MQTT, a device is its topic level and Home Assistant knows it by its address.
        var levels: [String: Int] = [:]
        var identities: [String: Int] = [:]
        names.reserveCapacity(devices.count)
        entries.reserveCapacity(devices.count)
        for (index, device) in devices.enumerated() {
            let field = "devices[\(index)]"
            let location = device.location ?? top
            if device.reads.isEmpty, device.writes.isEmpty, device.notifications.isEmpty, device.advertising == nil {
                throw refuse(
                    field, at: location,
                    "device `\(ConfigurationLoader.shown(device.name))` does nothing: give it a profile, "
                        + "`advertisements:`, or at least one of read, write or notify"
                )
            }
            if let clash = Self.readingNameProblem(of: device, field: field, at: location, origins: origins) {
                throw clash
            }
            if let first = names[device.name] {
                let line = origins["devices[\(first)].name"].map { " (line \($0.location.line))" } ?? ""
                throw refuse(
                    "\(field).name", at: location,
                    "the name `\(ConfigurationLoader.shown(device.name))` is already used by devices[\(first)]\(line): "
                        + "names must be unique"
                )
            }
            names[device.name] = index
            guard HostBluetooth.isValidAddress(device.address) else {
                throw refuse(
                    "\(field).address", at: location, kind: .badAddress,
                    "`\(device.address)` is not an address like AA:BB:CC:DD:EE:FF"
                )
            }
            let adapter = device.adapter ?? self.adapter
            guard HostBluetooth.isValidAdapter(adapter) else {
                throw refuse("\(field).adapter", at: location, "`\(adapter)` is not an adapter name like hci0")
            }
            let key = "\(device.address.uppercased())@\(adapter)"
            if let first = entries[key] {
                throw refuse(
                    "\(field).address", at: location,
                    "\(device.address) on \(adapter) is already devices[\(first)] "
                        + "(`\(ConfigurationLoader.shown(devices[first].name))`): one entry per device and adapter"
                )
            }
            entries[key] = index
            if mqtt != nil {
                let level = BridgeNaming.topicLevel(device.name)
                if let first = levels[level] {
                    throw refuse(
                        "\(field).name", at: location,
                        "`\(ConfigurationLoader.shown(device.name))` and devices[\(first)] "
                            + "(`\(ConfigurationLoader.shown(devices[first].name))`) share the MQTT topic level "
                            + "`\(ConfigurationLoader.shown(level))` (`/`, `+`, `#` and control characters become "
                            + "`_`): rename one")
                }
                levels[level] = index
                let identity = BridgeNaming.identity(ofAddress: device.address)
                // A shared device listed twice has the fleet's own rule, below, which says more.
                if let first = identities[identity], !device.shared, !devices[first].shared {
                    throw refuse(
                        "\(field).address", at: location,
                        "\(device.address) is already devices[\(first)] "
                            + "(`\(ConfigurationLoader.shown(devices[first].name))`) on another adapter: with `mqtt`, "
                            + "Home Assistant knows a device by its address, so configure it once")
                }
                identities[identity] = index
            }
            let interval = device.interval ?? self.interval
            if jitter >= interval {
                throw refuse(
                    "\(field).interval", at: location,
                    "interval \(interval.compact) must be longer than jitter \(jitter.compact)"
                )
            }
            if let problem = floorProblem(of: device, index: index, interval: interval, at: location) {
                throw problem
            }
            do {
                try KeepAlive.RegistrationOptions(interval: device.interval, budget: device.budget).validate(
                    against: scheduler)
            } catch {
                let name = error.field.hasSuffix(".interval") ? "interval" : "budget"
                throw refuse("\(field).\(name)", at: location, error.reason)
            }
            let budget = device.budget ?? scheduler.budget(forInterval: interval)
            if budget >= interval {
                // Only an explicit budget (the device's, or window_budget) can reach the interval: the derived one
                // is at most two thirds of it.
                throw device.budget != nil
                    ? refuse(
                        "\(field).budget", at: location,
                        "budget \(budget.compact) must be shorter than the device's interval \(interval.compact)")
                    : refuse(
                        "\(field).interval", at: location,
                        "interval \(interval.compact) is not longer than window_budget \(budget.compact): "
                            + "give this device a shorter `budget` or a longer interval")
            }
            for (position, subscription) in device.notifications.enumerated() {
                if let silence = subscription.silence, silence >= subscription.duration {
                    throw refuse(
                        "\(field).notify[\(position)].expect_every", at: location,
                        """
                        expect_every \(silence.compact) must be shorter than `for` \
                        (\(subscription.duration.compact)): 
                        """
                            + "a silence that long could never be noticed within the listening"
                    )
                }
                // Subscriptions listen in parallel inside the window: listening as long as the budget always times out.
                if subscription.duration >= budget {
                    throw refuse(
                        "\(field).notify[\(position)].for", at: location,
                        "listening \(subscription.duration.compact) must be shorter than the device's window budget "
                            + budget.compact
                    )
                }
            }
        }
        if let problem = fleetProblem() {
            // At the device's `shared:` (or the `fleet:` section), whichever field the rule names.
            let origin =
                problem.device.map { origins["devices[\($0)].shared"] } ?? origins[problem.field] ?? origins["fleet"]
            let location = origin?.location ?? problem.device.flatMap { devices[$0].location } ?? fleet?.location ?? top
            let kind: ConfigurationError.Kind = fleet == nil ? .missingKey : .invalidValue
            throw ConfigurationError(kind, at: location, field: problem.field, problem.message)
        }
    }

    /// A device polled more often than its floor (`min_interval`, its own or the file's) allows: the rule an
    /// `interval/set` command obeys, so that the file cannot do what a command may not. The error points at the
    /// value the file wrote that breaks it: the device's `interval`, else its own `min_interval`, else the file's
    /// `interval`, else the file's `min_interval` (raised above the default interval); nil when the device keeps it.
    func floorProblem(of device: Device, index: Int, interval: Duration, at location: SourceLocation)
        -> ConfigurationError?
    {
        let floor = minInterval(of: device)
        guard interval < floor else { return nil }
        let field = "devices[\(index)]"
        func line(_ key: String) -> String { origins[key].map { " (line \($0.location.line))" } ?? " (the default)" }
        let floorText =
            device.minInterval != nil
            ? "this device's min_interval \(floor.compact)\(line("\(field).min_interval"))"
            : "min_interval \(floor.compact)\(line("min_interval"))"
        let advice = "lengthen the interval, or lower min_interval for a device that bears being polled that often"
        let blamed: (key: String, message: String)
        if device.interval != nil {
            blamed = ("\(field).interval", "interval \(interval.compact) is shorter than \(floorText): \(advice)")
        } else if device.minInterval != nil {
            blamed = (
                "\(field).min_interval",
                "min_interval \(floor.compact) is longer than the interval \(interval.compact)\(line("interval")) "
                    + "this device is polled at: give it an interval of its own, at least \(floor.compact)"
            )
        } else if origins["interval"] != nil || origins["min_interval"] == nil {
            blamed = ("interval", "interval \(interval.compact) is shorter than \(floorText): \(advice)")
        } else {
            blamed = (
                "min_interval",
                "min_interval \(floor.compact) is longer than the interval \(interval.compact) (the default): "
                    + "set `interval:` to at least \(floor.compact)"
            )
        }
        let origin = origins[blamed.key]
        return ConfigurationError(
            .invalidValue, at: origin?.location ?? location, field: origin?.field ?? blamed.key, blamed.message)
    }

    /// The files `run` must read at start can be read now (`mqtt.password_file`, the TLS files), and the directory
    /// of `metrics.textfile` written: checked by `run`
    /// and `run --check` alike, so that a missing one is a configuration error (exit 78) at its line, not a failure
    /// after start. Apart from ``validate()``, whose rules hold whatever machine reads the file.
    public func checkFiles() throws(ConfigurationError) {
        try checkMetricsDirectory()
        guard let mqtt else { return }
        let files: [(field: String, path: String?)] = [
            ("mqtt.password_file", mqtt.passwordFile), ("mqtt.tls.ca_file", mqtt.caFile),
            ("mqtt.tls.cert_file", mqtt.certificateFile), ("mqtt.tls.key_file", mqtt.keyFile),
        ]
        for case (let field, let path?) in files where access(path, R_OK) != 0 {
            let reason = String(cString: strerror(errno))
            // The loader keeps positions one level down: a TLS file is pointed at by its `tls:` line.
            let origin = origins[field] ?? (field.hasPrefix("mqtt.tls.") ? origins["mqtt.tls"] : nil)
            throw ConfigurationError(
                .invalidValue,
                at: origin?.location ?? SourceLocation(file: self.path ?? "DaemonConfiguration", line: 0, column: 0),
                field: origin?.field ?? field, "cannot read `\(ConfigurationLoader.shown(path))`: \(reason)")
        }
    }

    /// Every reading a device gives has a name of its own: records and Home Assistant key them by name. A clash
    /// (two layouts with a `temperature`, a field named like a SIG reading) names both places, reported in the
    /// file being loaded when one of them is there. A profile file is checked by the same rule.
    static func readingNameProblem(
        of device: Device, field: String, at location: SourceLocation, origins: [String: Origin]
    ) -> ConfigurationError? {
        var seen: [String: Origin] = [:]
        var characteristics = Set<BluetoothUUID>()
        for uuid in device.reads + device.notifications.map(\.characteristic)
        where characteristics.insert(uuid).inserted {
            if let problem = device.decoding[uuid]?.layout?.validate().first {
                let origin = origins["\(field).decoding[\(uuid.shortDescription)]"]
                return ConfigurationError(
                    .invalidValue, at: origin?.location ?? location,
                    field: "\(field).decoding[\(uuid.shortDescription)]",
                    problem.message)
            }
            for (name, _) in DeviceProfile.expectedReadings(of: uuid, decoding: device.decoding[uuid]) {
                let origin =
                    origins[readingKey(field, name, uuid)]
                    ?? Origin(location: location, field: "\(field).decoding[\(uuid.shortDescription)]")
                if let first = seen[name] {
                    let file = location.file
                    let reportHere = origin.location.file == file || first.location.file != file
                    let (here, there) = reportHere ? (origin, first) : (first, origin)
                    return ConfigurationError(
                        .invalidValue, at: here.location, field: here.field,
                        "the reading name `\(name)` is also given by \(there.field) at \(there.location): "
                            + "rename one (`name:` or the field's name) so each reading of \(field) has its own"
                    )
                }
                seen[name] = origin
            }
        }
        return nil
    }

    /// The ``origins`` key of the place that names reading `name` of `uuid` in the device at `field`.
    static func readingKey(_ field: String, _ name: String, _ uuid: BluetoothUUID) -> String {
        "\(field).readings.\(name)@\(uuid.shortDescription)"
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
