internal import YAML

// A profile's `history:` and `clock:`, and a device's `history:` and `clock_sync:` that use them.

extension ConfigurationLoader {
    /// A profile's `history: mi-flora`.
    static func profileHistory(_ node: YAMLNode, in document: Document) throws(ConfigurationError)
        -> DaemonConfiguration.HistoryFormat
    {
        let formats = DaemonConfiguration.HistoryFormat.allCases.map(\.rawValue).joined(separator: ", ")
        let word = try document.nonEmptyText(node, "history", expected: "a history format (\(formats))")
        guard let format = DaemonConfiguration.HistoryFormat(rawValue: word) else {
            throw document.error(
                .invalidValue, at: node, "history",
                "`\(shown(word))` is not a history format this daemon reads (\(formats))")
        }
        return format
    }

    /// A profile's `clock: {uuid: …, format: unix32le-tz8}`.
    static func profileClock(_ node: YAMLNode, in document: Document) throws(ConfigurationError)
        -> DaemonConfiguration.ClockCharacteristic
    {
        let formats = DaemonConfiguration.ClockCharacteristic.Format.allCases.map(\.rawValue).joined(separator: ", ")
        let fields = try Fields(
            node, path: "clock", allowed: ["uuid", "format"], in: document,
            expected: "a mapping like {uuid: ebe0ccb7-7a0a-4b0c-8a1a-6ff2997da3a6, format: unix32le-tz8}")
        let uuid = try document.uuid(try fields.required("uuid"), fields.field("uuid"))
        let formatNode = try fields.required("format")
        let word = try document.nonEmptyText(
            formatNode, fields.field("format"), expected: "a clock format (\(formats))")
        guard let format = DaemonConfiguration.ClockCharacteristic.Format(rawValue: word) else {
            throw document.error(
                .invalidValue, at: formatNode, fields.field("format"),
                "`\(shown(word))` is not a clock format this daemon writes (\(formats))")
        }
        return DaemonConfiguration.ClockCharacteristic(characteristic: uuid, format: format)
    }

    /// A device's `history:` (`24h`, or `{every: 24h, on_battery: true}`) and `clock_sync:` (`24h`), each
    /// possible only with a profile that says how.
    static func deferredWork(
        _ fields: Fields, profile: DeviceProfile?, into device: inout DaemonConfiguration.Device, in document: Document
    ) throws(ConfigurationError) {
        if let node = fields["history"] {
            let field = fields.field("history")
            guard let format = profile?.history else {
                throw document.error(
                    .invalidValue, at: node, field,
                    "\(profileSays(profile, what: "a history")); profiles with one: \(profiles(with: \.history))")
            }
            var history = DaemonConfiguration.History(format: format)
            if case .mapping = node {
                let entries = try Fields(
                    node, path: field, allowed: ["every", "on_battery"], in: document,
                    expected: "a duration like 24h, or a mapping like {every: 24h, on_battery: true}")
                if let every = entries["every"] {
                    history.every = try deferredEvery(every, entries.field("every"), in: document)
                }
                if let onBattery = entries["on_battery"] {
                    history.onBattery = try document.boolean(onBattery, entries.field("on_battery"))
                }
            } else {
                history.every = try deferredEvery(node, field, in: document)
            }
            device.history = history
        }
        if let node = fields["clock_sync"] {
            let field = fields.field("clock_sync")
            guard let clock = profile?.clock else {
                throw document.error(
                    .invalidValue, at: node, field,
                    "\(profileSays(profile, what: "a clock")); profiles with one: \(profiles(with: \.clock))")
            }
            device.clockSync = DaemonConfiguration.ClockSync(
                every: try deferredEvery(node, field, in: document), clock: clock)
        }
    }

    private static func deferredEvery(_ node: YAMLNode, _ field: String, in document: Document)
        throws(ConfigurationError) -> Duration
    {
        let every = try document.duration(node, field)
        let least = DaemonConfiguration.minimumDeferredEvery
        guard every >= least else {
            throw document.error(
                .invalidValue, at: node, field, "at least \(least.compact): each one costs the sensor a connection")
        }
        return every
    }

    private static func profileSays(_ profile: DeviceProfile?, what: String) -> String {
        guard let profile else { return "needs a `profile:` that declares \(what)" }
        return "the profile `\(profile.name)` declares no \(what.dropFirst(2))"
    }

    private static func profiles<T>(with property: KeyPath<DeviceProfile, T?>) -> String {
        let names = ((try? DeviceProfile.builtIn().get()) ?? []).filter { $0[keyPath: property] != nil }.map(\.name)
        return names.isEmpty ? "none" : names.sorted().joined(separator: ", ")
    }
}
