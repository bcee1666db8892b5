import Basics
import DBus
import KeepAlive
import Logging
import MQTTBridge
import Polling
import Readings

#if canImport(Glibc)
    import Glibc
#endif

/// `io.keepalive.Daemon1` at `/io/keepalive/Daemon`, owned as `io.keepalive` on the daemon's bus (docs/CONTROL.md).
///
/// Reading (`GetStatus`, `GetDevice`, `Explain`, the `Version`/`Health`/`Healthy` properties) is for every local
/// user; steering (`PollNow`, `SetInterval`, `Pause`, `Resume`) only for root and the `keepalive` group. The bus
/// enforces that, with the policy the package installs (udev/io.keepalive.conf); the daemon checks arguments.
/// `Record(device, line)` is emitted for every record, with its JSON line as the output file has it, while a client
/// watches (`WatchRecords`; until `UnwatchRecords` or it leaves the bus).
struct ControlInterface: Sendable {
    static let busName = "io.keepalive"
    static let path: ObjectPath = "/io/keepalive/Daemon"
    static let interface = "io.keepalive.Daemon1"

    /// The errors steering answers with, by D-Bus name.
    enum ErrorName {
        static let unknownDevice = "io.keepalive.Error.UnknownDevice"
        static let refused = "io.keepalive.Error.Refused"
        static let notHeld = "io.keepalive.Error.NotHeld"
        static let paused = "io.keepalive.Error.Paused"
        static let pollPending = "io.keepalive.Error.PollPending"
        static let pollTooSoon = "io.keepalive.Error.PollTooSoon"
        static let invalidInterval = "io.keepalive.Error.InvalidInterval"
    }

    let board: DeviceBoard
    let engine: PollEngine
    let keepAlive: KeepAlive
    let configuration: DaemonConfiguration
    let status: StatusBoard
    let bridge: MQTTBridge?
    /// Shared with the MQTT commands: one pending poll per device and one per floor, whoever asks.
    let commandPolls: Locked<CommandPollLimiter>
    let logger: Logger
    /// Told when a client starts (`true`) or stops watching records (`WatchRecords`, `UnwatchRecords`), by its
    /// unique name.
    var watch: @Sendable (String, Bool) -> Void = { _, _ in }
    /// A monotonic clock for the limiter.
    var now: @Sendable () -> Duration = { .nanoseconds(clockNanoseconds(CLOCK_MONOTONIC)) }

    var object: DBusObject {
        DBusObject(interfaces: [
            DBusInterface(
                Self.interface,
                methods: [
                    DBusMethod("GetStatus", in: "", out: "a{sv}", outNames: ["status"]) { _ in
                        [Self.dictionary(daemonStatus())]
                    },
                    DBusMethod("GetDevice", in: "s", out: "a{sv}", inNames: ["device"], outNames: ["device"]) { call in
                        let name = try Self.deviceArgument(call)
                        guard let entry = deviceStatus(name) else { throw Self.unknown(name) }
                        return [Self.dictionary(entry)]
                    },
                    DBusMethod("Explain", in: "s", out: "a{sv}", inNames: ["device"], outNames: ["explanation"]) {
                        call in
                        let name = try Self.deviceArgument(call)
                        guard let explanation = explain(name) else { throw Self.unknown(name) }
                        return [Self.dictionary(explanation)]
                    },
                    DBusMethod("WatchRecords") { [watch] call in
                        guard let sender = call.sender else { return [] }
                        watch(sender, true)
                        return []
                    },
                    DBusMethod("UnwatchRecords") { [watch] call in
                        guard let sender = call.sender else { return [] }
                        watch(sender, false)
                        return []
                    },
                    DBusMethod("PollNow", in: "s", out: "a{sv}", inNames: ["device"], outNames: ["record"]) { call in
                        [Self.dictionary(try await pollNow(try Self.deviceArgument(call)))]
                    },
                    DBusMethod(
                        "SetInterval", in: "st", out: "t", inNames: ["device", "milliseconds"],
                        outNames: ["effective_milliseconds"]
                    ) { call in
                        guard case .uint64(let milliseconds) = call.arguments[1] else { return [] }
                        let effective = try setInterval(try Self.deviceArgument(call), milliseconds: milliseconds)
                        return [.uint64(UInt64(clamping: effective.milliseconds))]
                    },
                    DBusMethod("Pause", in: "s", out: "b", inNames: ["device"], outNames: ["changed"]) { call in
                        let name = try Self.deviceArgument(call)
                        guard board.device(named: name) != nil else { throw Self.unknown(name) }
                        let changed = board.pause(name)
                        if changed { logger.notice("paused on command", metadata: ["device": "\(name)"]) }
                        return [.boolean(changed)]
                    },
                    DBusMethod("Resume", in: "s", out: "b", inNames: ["device"], outNames: ["changed"]) { call in
                        let name = try Self.deviceArgument(call)
                        guard board.device(named: name) != nil else { throw Self.unknown(name) }
                        let changed = board.resume(name)
                        if changed { logger.notice("resumed on command", metadata: ["device": "\(name)"]) }
                        return [.boolean(changed)]
                    },
                ],
                properties: [
                    DBusProperty("Version", signature: "s", get: { .string(KeepAliveVersion.current) }),
                    DBusProperty("Health", signature: "s", get: { [status] in .string(status.withLock { $0.text }) }),
                    DBusProperty(
                        "Healthy", signature: "b", get: { [status] in .boolean(status.withLock { $0.isHealthy }) }),
                ],
                signals: [DBusSignalDeclaration("Record", signature: "ss")]
            )
        ])
    }

    // MARK: Reading

    func daemonStatus() -> [(String, DBusValue)] {
        let health = status.withLock { $0 }
        var entries: [(String, DBusValue)] = [
            ("version", .string(KeepAliveVersion.current)),
            ("health", .string(health.text)),
            ("healthy", .boolean(health.isHealthy)),
            ("running", .boolean(keepAlive.isRunning)),
            ("power", .string(keepAlive.powerState.rawValue)),
            ("interval_s", .double(configuration.interval.secondsDouble)),
        ]
        let adapters = configuration.adapters.map { name in
            Self.dictionary([
                ("name", .string(name)),
                ("healthy", .boolean(health.unhealthyAdapters[name] == nil)),
                ("why", .string(health.unhealthyAdapters[name] ?? "")),
                (
                    "devices",
                    .uint32(UInt32(clamping: board.configured.filter { $0.adapter == name }.count))
                ),
            ])
        }
        entries.append(("adapters", .array(element: "a{sv}", adapters)))
        if let bridge {
            let statistics = bridge.statistics
            var mqtt: [(String, DBusValue)] = [
                ("connected", .boolean(statistics.connected)),
                ("spool_depth", .uint64(UInt64(clamping: statistics.pending))),
                ("spool_bytes", .uint64(UInt64(clamping: statistics.spoolBytes))),
                ("delivered", .uint64(statistics.delivered)),
                ("dropped", .uint64(statistics.dropped)),
            ]
            if let failing = health.failingSinks["the MQTT spool"] { mqtt.append(("problem", .string(failing))) }
            entries.append(("mqtt", Self.dictionary(mqtt)))
        }
        let devices = board.configured.compactMap { deviceStatus($0.name) }.map(Self.dictionary)
        entries.append(("devices", .array(element: "a{sv}", devices)))
        return entries
    }

    /// One device's state, as `keepalive status` shows it (docs/CONTROL.md lists the keys).
    func deviceStatus(_ name: String) -> [(String, DBusValue)]? {
        guard let device = board.device(named: name), let (state, decisions, strings) = board.snapshot(of: name)
        else { return nil }
        let schedule = engine.schedule(of: name)
        let configured = configuration.devices.first { $0.name == name }?.interval ?? configuration.interval
        var entries: [(String, DBusValue)] = [
            ("name", .string(name)),
            ("address", .string(device.address)),
            ("adapter", .string(device.adapter)),
            ("passive", .boolean(device.passive)),
            ("state", .string(Self.state(state, schedule: schedule, last: decisions.last))),
            ("paused", .boolean(state.pausedAt != nil)),
            ("records", .uint64(state.records)),
            ("failures_in_row", .uint32(UInt32(clamping: state.failuresInRow))),
            ("slot_waits", .uint64(state.slotWaits)),
        ]
        if let last = state.last {
            entries.append(("last_result", .string(last.result.rawValue)))
            entries.append(("last_trigger", .string(last.trigger.rawValue)))
            entries.append(("last_at", .string(Self.timestamp(last.at))))
            entries.append(("last_age_s", .double(Double(board.wallNow() - last.at) / 1000)))
            entries.append(("last_seq", .uint64(last.sequence)))
            if let failure = last.failure {
                entries.append(("last_error", .string(failure.code)))
                entries.append(("last_error_message", .string(failure.message)))
            }
            entries.append(("readings", Self.dictionary(Self.readings(last.readings))))
        }
        if let schedule {
            entries.append(("interval_s", .double(schedule.interval.secondsDouble)))
            entries.append(("interval_reason", .string(Explanation.intervalReason(schedule, configured: configured))))
            if let effective = schedule.effectiveInterval {
                entries.append(("effective_interval_s", .double(effective.secondsDouble)))
            }
            // Backing off, the first tick at or after the backoff's end polls: that is when it is due.
            if let next = schedule.nextFire, state.pausedAt == nil {
                let due = max(next, schedule.backoffUntil ?? next)
                entries.append(("next_due", .string(Self.timestamp(board.wallTime(of: due)))))
            }
            if let until = schedule.backoffUntil {
                entries.append(("backoff_until", .string(Self.timestamp(board.wallTime(of: until)))))
            }
        }
        if let code = state.lastFailureCode { entries.append(("last_failure_code", .string(code))) }
        if let wait = state.slotWait { entries.append(("slot_wait_s", .double(wait.secondsDouble))) }
        if let link = state.link { entries.append(("link_s", .double(link.secondsDouble))) }
        if let holder = state.holder ?? strings[decisions.last?.holder ?? 0] {
            entries.append(("holder", .string(holder)))
        }
        if device.listened {
            entries.append(
                ("heard", .boolean(state.heardAt.map { board.wallNow() - $0 < 3 * configured.milliseconds } ?? false)))
            if let heard = state.heard {
                entries.append(("heard_count", .uint64(UInt64(clamping: heard.count))))
                if let rssi = heard.rssi { entries.append(("rssi", .int16(rssi))) }
            }
            if let at = state.heardAt { entries.append(("heard_at", .string(Self.timestamp(at)))) }
        }
        return entries
    }

    /// One word for the device's state: `paused`, `held elsewhere`, `backing off`, `failing`, `not heard`, `ok`,
    /// `waiting` (no record yet), `critical pause`.
    static func state(_ state: DeviceBoard.DeviceState, schedule: KeepAlive.RegistrationStatus?, last: Decision?)
        -> String
    {
        if state.pausedAt != nil { return "paused" }
        if schedule != nil, schedule?.effectiveInterval == nil { return "critical pause" }
        if last?.kind == .heldElsewhere { return "held elsewhere" }
        if schedule?.backoffUntil != nil { return "backing off" }
        guard let lastRecord = state.last else { return "waiting" }
        if last?.kind == .notHeard { return "not heard" }
        return lastRecord.result == .failed ? "failing" : "ok"
    }

    func explain(_ name: String) -> [(String, DBusValue)]? {
        guard let device = board.device(named: name), let (state, decisions, strings) = board.snapshot(of: name)
        else { return nil }
        let configured = configuration.devices.first { $0.name == name }?.interval ?? configuration.interval
        let context = Explanation.Context(
            schedule: engine.schedule(of: name), configuredInterval: configured,
            unhealthyAdapters: status.withLock { $0.unhealthyAdapters }, schedulerStopped: !keepAlive.isRunning,
            wallTime: { [board] in board.wallTime(of: $0) })
        let explanation = Explanation(
            device: device, state: state, decisions: decisions, strings: strings, context: context)
        let entries = explanation.entries.map { entry in
            var fields: [(String, DBusValue)] = [
                ("at", .string(Self.timestamp(entry.first))),
                ("kind", .string(entry.kind)),
                ("count", .uint32(UInt32(clamping: entry.count))),
                ("text", .string(entry.text)),
            ]
            if entry.count > 1 { fields.append(("until", .string(Self.timestamp(entry.last)))) }
            if let code = entry.code { fields.append(("code", .string(code))) }
            return Self.dictionary(fields)
        }
        return [
            ("device", .string(name)),
            ("now", .array(element: "s", explanation.now.map(DBusValue.string))),
            ("decisions", .array(element: "a{sv}", entries)),
        ]
    }

    // MARK: Steering

    func pollNow(_ name: String) async throws -> [(String, DBusValue)] {
        guard board.device(named: name) != nil else { throw Self.unknown(name) }
        guard !board.isPaused(name) else {
            throw DBusError(name: ErrorName.paused, message: "`\(name)` is paused (keepalive resume \(name))")
        }
        let floor =
            configuration.devices.first { $0.name == name }.map(configuration.minInterval(of:))
            ?? DaemonConfiguration.defaultMinInterval
        let decision = commandPolls.withLock { $0.admit(name, floor: floor, at: now()) }
        switch decision {
        case .poll: break
        case .pending: throw DBusError(name: ErrorName.pollPending, message: "\(name): \(decision.reason)")
        case .tooSoon: throw DBusError(name: ErrorName.pollTooSoon, message: "\(name): \(decision.reason)")
        }
        logger.info("poll on command (D-Bus)", metadata: ["device": "\(name)"])
        var polled = false
        defer { commandPolls.withLock { $0.finished(name, polled: polled, at: now()) } }
        let record: PollRecord
        do {
            record = try await engine.pollNow(name)
            polled = true
        } catch {
            let errorName =
                switch error.code {
                case .unknownDevice: ErrorName.unknownDevice
                case .notHeld: ErrorName.notHeld
                case .paused: ErrorName.paused
                default: ErrorName.refused
                }
            throw DBusError(name: errorName, message: error.message)
        }
        var entries: [(String, DBusValue)] = [
            ("device", .string(record.device)),
            ("result", .string(record.result.rawValue)),
            ("trigger", .string(record.trigger.rawValue)),
            ("tick", .uint64(record.tick)),
            ("readings", Self.dictionary(Self.readings(record.readings))),
        ]
        if let failure = record.failure {
            entries.append(("error", .string(failure.code)))
            entries.append(("error_message", .string(failure.message)))
        }
        if let used = record.window?.used { entries.append(("window_used_s", .double(used.secondsDouble))) }
        return entries
    }

    func setInterval(_ name: String, milliseconds: UInt64) throws -> Duration {
        guard let device = configuration.devices.first(where: { $0.name == name }) else { throw Self.unknown(name) }
        let interval = Duration.milliseconds(Int64(clamping: milliseconds))
        let floor = configuration.minInterval(of: device)
        guard interval >= floor else {
            throw DBusError(
                name: ErrorName.invalidInterval,
                message: "\(name): \(interval.compact) is below its floor \(floor.compact) (min_interval)")
        }
        let effective: Duration?
        do {
            effective = try engine.setInterval(interval, forDevice: name)
        } catch {
            throw DBusError(name: ErrorName.invalidInterval, message: "\(name): \(error.reason)")
        }
        logger.notice(
            "interval changed on command (D-Bus)", metadata: ["device": "\(name)", "interval": "\(interval.compact)"])
        bridge?.intervalChanged(device: name, to: effective ?? interval)
        return effective ?? interval
    }

    // MARK: Values

    static func deviceArgument(_ call: DBusMethodCall) throws -> String {
        guard case .string(let name) = call.arguments.first else {
            throw DBusError(name: "org.freedesktop.DBus.Error.InvalidArgs", message: "expected a device name")
        }
        return name
    }

    static func unknown(_ name: String) -> DBusError {
        DBusError(name: ErrorName.unknownDevice, message: "no device named `\(JSONText.printable(name))`")
    }

    static func dictionary(_ entries: [(String, DBusValue)]) -> DBusValue {
        .dictionary(
            key: "s", value: "v",
            entries.map { DBusDictionaryEntry(key: .string($0.0), value: .variant($0.1)) })
    }

    /// Numbers as doubles, booleans as booleans, the rest as text; a reading that did not decode is left out (its
    /// error is in the record).
    static func readings(_ readings: [Reading]) -> [(String, DBusValue)] {
        readings.compactMap { reading in
            guard let value = reading.value else { return nil }
            switch value {
            case .boolean(let flag): return (reading.name, .boolean(flag))
            case .text(let text): return (reading.name, .string(text))
            case .numbers(let numbers): return (reading.name, .array(element: "d", numbers.map(DBusValue.double)))
            default: return value.doubleValue.map { (reading.name, .double($0)) }
            }
        }
    }

    static func timestamp(_ milliseconds: Int64) -> String {
        let seconds = Int(milliseconds.quotientAndRemainder(dividingBy: 1000).quotient)
        let remainder = Int(milliseconds - Int64(seconds) * 1000)
        return WallClock.Time(seconds: seconds, nanoseconds: remainder * 1_000_000).rfc3339
    }
}
