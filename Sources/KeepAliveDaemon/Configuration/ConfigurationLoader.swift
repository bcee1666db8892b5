internal import KeepAlive
internal import Polling
internal import YAML

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Reads the YAML file of `keepalive run --config PATH` into a ``DaemonConfiguration``.
///
/// The format is documented by example in ``ExampleConfiguration/yaml`` (also `Examples/keepalive.yaml`).
/// Every mistake is a ``ConfigurationError`` naming the file, line and column of the offending value (of the
/// key, for an unknown key; of the mapping, for a missing key) and the field path, e.g.
/// `keepalive.yaml:12:14: devices[1].address: "C0:FF:EE:00:00" is not a Bluetooth address …`. Only the first
/// mistake is reported, and no input traps: the checks run before any core type with preconditions is built.
///
/// ```swift
/// do {
///     let configuration = try ConfigurationLoader.load(path: "/etc/keepalive/keepalive.yaml")
///     print(configuration.peripheralSpecs().map(\.name))
/// } catch {
///     print(error)  // keepalive.yaml:3:11: interval: a bare number is ambiguous …
/// }
/// ```
public enum ConfigurationLoader {
    /// Files beyond this are refused unread: a configuration is a few kilobytes, and `--config /dev/zero` must
    /// not eat the memory.
    static let largestFile = 1 << 20

    static let topLevelKeys = [
        "interval", "jitter", "window_budget", "low_power", "adapter", "max_connections", "output", "mqtt", "fleet",
        "devices",
        "adapter_power", "healing", "min_interval", "placement", "poll_when", "metrics", "state_directory",
    ]
    static let deviceKeys = [
        "name", "address", "adapter", "interval", "budget", "profile", "fields", "read", "write", "notify", "shared",
        "min_interval", "advertisements", "key", "key_file", "poll_when", "history", "clock_sync",
    ]
    static let profileKeys = [
        "profile", "manufacturer", "model", "description", "read", "write", "notify", "history", "clock",
    ]

    /// Reads and parses the file at `path`; the result's `path` is set.
    public static func load(path: String) throws(ConfigurationError) -> DaemonConfiguration {
        let bytes = try readFile(path)
        guard let text = String(validating: bytes, as: UTF8.self) else { throw notUTF8(bytes, file: path) }
        var configuration = try parse(text, file: path)
        configuration.path = path
        return configuration
    }

    /// Parses YAML text; `file` is only the name used in error locations.
    public static func parse(_ text: String, file: String) throws(ConfigurationError) -> DaemonConfiguration {
        let document = Document(file: file, text: text)
        guard let root = try document.root(text), root.tag != YAMLTag.null else {
            throw ConfigurationError(
                .missingKey, at: document.start, field: "devices",
                "the file is empty: it needs at least a `devices:` list (see Examples/keepalive.yaml)"
            )
        }
        return try configuration(root, in: document)
    }

    // MARK: - The top level

    private static func configuration(
        _ root: YAMLNode, in document: Document
    ) throws(ConfigurationError) -> DaemonConfiguration {
        let fields = try Fields(
            root, path: "", allowed: topLevelKeys, in: document,
            expected: "a mapping of settings (interval:, devices:, …) at the top level"
        )
        var configuration = DaemonConfiguration()
        var entries: [DeviceEntry] = []
        for pair in fields.pairs {
            let value = pair.value
            switch pair.key {
            case "interval": configuration.interval = try document.duration(value, "interval")
            case "min_interval": configuration.minInterval = try document.duration(value, "min_interval")
            case "jitter": configuration.jitter = try document.duration(value, "jitter", allowZero: true)
            case "window_budget": configuration.windowBudget = try document.duration(value, "window_budget")
            case "low_power":
                (configuration.lowPower, configuration.powerMode, configuration.criticalPercentage) =
                    try lowPower(value, in: document)
            case "adapter": configuration.adapter = try document.adapter(value, "adapter")
            case "max_connections":
                configuration.maxConnections = try document.integer(value, "max_connections", in: 1...16)
            case "placement": configuration.placement = try document.boolean(value, "placement")
            case "poll_when": configuration.pollWhen = try pollWhen(value, "poll_when", in: document)
            case "output":
                let output = try document.nonEmptyText(
                    value, "output", expected: "`-` (standard output), `none` or a path")
                configuration.output = output == "-" ? .standardOutput : output == "none" ? .none : .file(output)
            case "mqtt": configuration.mqtt = try mqtt(value, in: document)
            case "fleet": configuration.fleet = try fleet(value, in: document)
            case "metrics": configuration.metrics = try metrics(value, in: document)
            case "state_directory": configuration.stateDirectory = try document.path(value, "state_directory")
            case "devices": entries = try devices(value, in: document)
            case "adapter_power": configuration.healing.powerOn = try adapterPower(value, in: document)
            case "healing": try healing(value, into: &configuration.healing, in: document)
            default: break  // `Fields` refused every other key.
            }
        }
        _ = try fields.required("devices")
        for pair in fields.pairs {
            configuration.origins[pair.key] = DaemonConfiguration.Origin(
                location: document.location(pair.value), field: pair.key)
            // And one level down (`fleet.scan`, `low_power.multiplier`): where a section's own rules point.
            guard case .mapping(let section) = pair.value else { continue }
            for (keyNode, value) in section {
                guard case .scalar(let key) = keyNode else { continue }
                let field = "\(pair.key).\(key.string)"
                configuration.origins[field] = DaemonConfiguration.Origin(
                    location: document.location(value), field: field)
            }
        }
        for entry in entries { configuration.origins.merge(entry.origins) { first, _ in first } }
        configuration.devices = entries.map(\.device)
        // Every rule across values is `validate()`'s, said at the place of the value that breaks it (`origins`).
        try configuration.validate()
        // Passed: nothing is left to point at, and at 10,000 devices the positions would cost megabytes for good;
        // but the files `run` reads or writes at start (`checkFiles()`): the MQTT and metrics sections' few
        // positions stay.
        configuration.origins = configuration.origins.filter {
            $0.key.hasPrefix("mqtt.") || $0.key.hasPrefix("metrics.")
        }
        return configuration
    }

    private static func lowPower(
        _ node: YAMLNode, in document: Document
    ) throws(ConfigurationError) -> (LowPowerPolicy, DaemonConfiguration.PowerMode, Int) {
        let fields = try Fields(
            node, path: "low_power", allowed: ["mode", "multiplier", "critical", "critical_below"], in: document,
            expected: "a mapping like {mode: auto, multiplier: 2, critical: pause}"
        )
        var multiplier = 2.0
        var critical = LowPowerPolicy.Critical.pause
        var mode = DaemonConfiguration.PowerMode.auto
        var criticalBelow = 10
        for pair in fields.pairs {
            switch pair.key {
            case "mode":
                let word = try document.text(pair.value, "low_power.mode", expected: "`auto`, `on` or `off`")
                guard let parsed = DaemonConfiguration.PowerMode(rawValue: word) else {
                    throw document.error(
                        .invalidValue, at: pair.value, "low_power.mode",
                        """
                            expected `auto` (follow UPower, power-profiles-daemon or sysfs), `on` (always low power) \
                            or `off` (never), found \(document.describe(pair.value))
                            """
                    )
                }
                mode = parsed
            case "multiplier":
                multiplier = try document.number(pair.value, "low_power.multiplier", in: 1...largestMultiplier)
            case "critical":
                critical = try criticalPolicy(pair.value, in: document)
            case "critical_below":
                criticalBelow = try document.integer(pair.value, "low_power.critical_below", in: 1...50)
            default: break
            }
        }
        // Both values were range-checked above, so the initialiser's preconditions hold.
        return (LowPowerPolicy(lowPowerMultiplier: multiplier, critical: critical), mode, criticalBelow)
    }

    /// `critical: pause` or `critical: {stretch: 4}`: one key per choice, so a factor cannot be given to `pause`.
    private static func criticalPolicy(
        _ node: YAMLNode, in document: Document
    ) throws(ConfigurationError) -> LowPowerPolicy.Critical {
        let field = "low_power.critical"
        let expected = "`pause` or a mapping like {stretch: 4}"
        if case .mapping = node {
            let fields = try Fields(node, path: field, allowed: ["stretch"], in: document, expected: expected)
            let factor = try fields.required("stretch")
            return .stretch(try document.number(factor, "\(field).stretch", in: 1...largestMultiplier))
        }
        let word = try document.text(node, field, expected: expected)
        switch word {
        case "pause":
            return .pause
        case "stretch":
            throw document.error(
                .invalidValue, at: node, field, "`stretch` needs a factor: write `critical: {stretch: 4}`"
            )
        default:
            throw document.error(
                .invalidValue, at: node, field, "expected \(expected), found \(document.describe(node))"
            )
        }
    }

    // MARK: - Devices

    /// A device and where the file wrote its values (``DaemonConfiguration/origins``).
    private struct DeviceEntry {
        var device: DaemonConfiguration.Device
        var origins: [String: DaemonConfiguration.Origin]
    }

    private static func devices(_ node: YAMLNode, in document: Document) throws(ConfigurationError) -> [DeviceEntry] {
        let items = try document.sequence(node, "devices", expected: "a sequence of devices (`- name: …`)")
        guard !items.isEmpty else {
            throw document.error(
                .invalidValue, at: node, "devices", "the list is empty: the daemon needs at least one device"
            )
        }
        var entries: [DeviceEntry] = []
        entries.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            entries.append(try device(item, path: "devices[\(index)]", in: document))
        }
        return entries
    }

    private static func device(
        _ node: YAMLNode, path: String, in document: Document
    ) throws(ConfigurationError) -> DeviceEntry {
        let fields = try Fields(
            node, path: path, allowed: deviceKeys, in: document,
            expected: "a device mapping (name:, address:, profile: or read:/write:/notify:)"
        )
        var device = DaemonConfiguration.Device(name: "", address: "", location: document.location(node))
        var own = Operations()
        for pair in fields.pairs {
            let value = pair.value
            let field = fields.field(pair.key)
            switch pair.key {
            case "name":
                device.name = try document.nonEmptyText(value, field, expected: "a name like greenhouse-north")
            case "address": device.address = try document.address(value, field)
            case "adapter": device.adapter = try document.adapter(value, field)
            case "interval": device.interval = try document.duration(value, field)
            case "budget": device.budget = try document.duration(value, field)
            case "min_interval": device.minInterval = try document.duration(value, field)
            case "shared": device.shared = try document.boolean(value, field)
            case "poll_when": device.pollWhen = try pollWhen(value, field, in: document)
            case "read", "write", "notify": try operation(pair.key, value, field: field, into: &own, in: document)
            default: break  // profile and fields: below, once the rest is known
            }
        }
        var operations = own
        var deviceProfile: DeviceProfile?
        if let profileNode = fields["profile"] {
            let profile = try self.profile(named: profileNode, field: fields.field("profile"), in: document)
            deviceProfile = profile.profile
            device.profile = profile.name
            device.manufacturer = profile.manufacturer
            device.model = profile.model
            operations = profile.operations.merged(with: own)
            // A listening time from the profile is checked against this device's budget: report it at the
            // device's `profile:` (the file being loaded), naming the profile's own line.
            let here = document.location(profileNode)
            operations.listenings = operations.listenings.map { listening in
                guard listening.location.file != here.file else { return listening }
                var moved = listening
                moved.location = here
                moved.field =
                    "\(fields.field("profile")) (\(profile.name): \(listening.field) at \(listening.location))"
                return moved
            }
        }
        if let overrides = fields["fields"] {
            try applyOverrides(overrides, path: fields.field("fields"), to: &operations, in: document)
        }
        device.advertising = try advertising(fields, in: document)
        try deferredWork(fields, profile: deviceProfile, into: &device, in: document)
        device.writes = operations.writes
        device.reads = operations.reads
        device.notifications = operations.notifications
        device.decoding = operations.decoding
        _ = try fields.required("name")
        _ = try fields.required("address")
        return DeviceEntry(
            device: device,
            origins: origins(of: device, path: path, fields: fields, operations: operations, in: document))
    }

    /// Where the file (or a profile it names) wrote each of a device's values, for `validate()`'s errors.
    private static func origins(
        of device: DaemonConfiguration.Device, path: String, fields: Fields, operations: Operations,
        in document: Document
    ) -> [String: DaemonConfiguration.Origin] {
        var origins: [String: DaemonConfiguration.Origin] = [:]
        origins[path] = DaemonConfiguration.Origin(location: device.location ?? document.start, field: path)
        for pair in fields.pairs {
            let field = fields.field(pair.key)
            origins[field] = DaemonConfiguration.Origin(location: document.location(pair.value), field: field)
        }
        for (position, subscription) in device.notifications.enumerated() {
            guard
                let listening = operations.listenings.first(where: { $0.characteristic == subscription.characteristic })
            else { continue }
            origins["\(path).notify[\(position)].for"] = DaemonConfiguration.Origin(
                location: listening.location, field: listening.field)
            if let location = listening.silenceLocation {
                // Named like `for`'s field (a profile's listening is named at the device's `profile:`).
                let field =
                    listening.field.hasSuffix(".for") ? listening.field.dropLast(4) + ".expect_every" : listening.field
                origins["\(path).notify[\(position)].expect_every"] = DaemonConfiguration.Origin(
                    location: location, field: field)
            }
        }
        origins.merge(readingOrigins(of: device, path: path, operations: operations, in: document)) { first, _ in first
        }
        return origins
    }

    /// Where each reading's name was given (a layout's field, a `name:`, a profile's line).
    private static func readingOrigins(
        of device: DaemonConfiguration.Device, path: String, operations: Operations, in document: Document
    ) -> [String: DaemonConfiguration.Origin] {
        var origins: [String: DaemonConfiguration.Origin] = [:]
        var characteristics = Set<BluetoothUUID>()
        for uuid in device.reads + device.notifications.map(\.characteristic)
        where characteristics.insert(uuid).inserted {
            let origin = operations.origins[uuid]
            for (name, _) in DeviceProfile.expectedReadings(of: uuid, decoding: device.decoding[uuid]) {
                origins[DaemonConfiguration.readingKey(path, name, uuid)] = DaemonConfiguration.Origin(
                    location: origin?.fieldLocations[name] ?? origin?.location ?? document.start,
                    field: origin?.field ?? path)
            }
        }
        return origins
    }

    /// The shipped profile named by `node`, or an error listing the ones there are.
    private static func profile(named node: YAMLNode, field: String, in document: Document) throws(ConfigurationError)
        -> (name: String, manufacturer: String?, model: String?, operations: Operations, profile: DeviceProfile)
    {
        let name = try document.nonEmptyText(
            node, field, expected: "a profile name like mi-flora (see `keepalive profiles`)")
        for (_, result) in embeddedProfiles {
            let parsed = try result.get()
            if parsed.profile.name == name {
                return (name, parsed.profile.manufacturer, parsed.profile.model, parsed.operations, parsed.profile)
            }
        }
        let known = EmbeddedProfiles.files.map { String($0.name.dropFirst("Profiles/".count).dropLast(".yaml".count)) }
        let closest = known.map { ($0, editDistance(name, $0)) }.min { $0.1 < $1.1 }
        let hint = closest.flatMap { $0.1 <= 3 ? "did you mean `\($0.0)`? " : nil } ?? ""
        throw document.error(
            .invalidValue, at: node, field,
            """
                unknown profile `\(shown(name))`: \(hint)known profiles: \(known.joined(separator: ", ")) (`keepalive \
                profiles`)
                """
        )
    }

    /// The profiles in the binary, parsed once per process: a file of 10,000 devices naming profiles parsed
    /// every profile file for each of them.
    private static let embeddedProfiles:
        [(file: String, Result<(profile: DeviceProfile, operations: Operations), ConfigurationError>)] =
            EmbeddedProfiles.files.map { file, bytes in
                (
                    file,
                    Result { () throws(ConfigurationError) in
                        try parseProfile(String(decoding: bytes, as: UTF8.self), file: file)
                    }
                )
            }

    /// Parses one profile file.
    public static func profile(_ text: String, file: String) throws(ConfigurationError) -> DeviceProfile {
        try parseProfile(text, file: file).profile
    }

    private static func parseProfile(_ text: String, file: String) throws(ConfigurationError) -> (
        profile: DeviceProfile, operations: Operations
    ) {
        let document = Document(file: file, text: text)
        guard let root = try document.root(text) else {
            throw ConfigurationError(.missingKey, at: document.start, field: "profile", "the profile is empty")
        }
        let fields = try Fields(
            root, path: "", allowed: profileKeys, in: document, expected: "a profile mapping (profile:, read:, …)")
        var operations = Operations()
        var profile = DeviceProfile(name: "", writes: [], reads: [], notifications: [], decoding: [:], file: file)
        for pair in fields.pairs {
            switch pair.key {
            case "profile":
                profile.name = try document.nonEmptyText(pair.value, "profile", expected: "the profile's name")
            case "manufacturer":
                profile.manufacturer = try document.nonEmptyText(
                    pair.value, "manufacturer", expected: "a manufacturer's name")
            case "model": profile.model = try document.nonEmptyText(pair.value, "model", expected: "a model name")
            case "description":
                profile.summary = try document.nonEmptyText(pair.value, "description", expected: "a line of text")
            case "history": profile.history = try profileHistory(pair.value, in: document)
            case "clock": profile.clock = try profileClock(pair.value, in: document)
            default: try operation(pair.key, pair.value, field: pair.key, into: &operations, in: document)
            }
        }
        _ = try fields.required("profile")
        // The configuration's own rule, on the profile as a device: a profile must be usable as it is.
        var asDevice = DaemonConfiguration.Device(name: profile.name, address: "", location: document.start)
        (asDevice.reads, asDevice.notifications, asDevice.decoding) = (
            operations.reads, operations.notifications, operations.decoding
        )
        let field = "profile \(profile.name)"
        let origins = readingOrigins(of: asDevice, path: field, operations: operations, in: document)
        if let clash = DaemonConfiguration.readingNameProblem(
            of: asDevice, field: field, at: document.start, origins: origins)
        {
            throw clash
        }
        profile.writes = operations.writes
        profile.reads = operations.reads
        profile.notifications = operations.notifications
        profile.decoding = operations.decoding
        return (profile, operations)
    }

    static func write(
        _ node: YAMLNode, path: String, in document: Document
    ) throws(ConfigurationError) -> PeripheralSpec.Write {
        let fields = try Fields(
            node, path: path, allowed: ["uuid", "value", "type"], in: document,
            expected: "a mapping like {uuid: 2a06, value: \"01\"}"
        )
        let uuid = try document.uuid(try fields.required("uuid"), "\(path).uuid")
        let value = try document.hexBytes(try fields.required("value"), "\(path).value")
        var type = WriteType.request
        if let typeNode = fields["type"] {
            let word = try document.text(typeNode, "\(path).type", expected: "`request` or `command`")
            guard let parsed = WriteType(rawValue: word) else {
                throw document.error(
                    .invalidValue, at: typeNode, "\(path).type",
                    "expected `request` (acknowledged, the default) or `command` (without response), "
                        + "found \(document.describe(typeNode))"
                )
            }
            type = parsed
        }
        return PeripheralSpec.Write(characteristic: uuid, value: value, type: type)
    }

    // MARK: - Reading the file

    private static func readFile(_ path: String) throws(ConfigurationError) -> [UInt8] {
        let start = SourceLocation(file: path, line: 1, column: 1)
        func unreadable(_ code: Int32) -> ConfigurationError {
            let reason = String(cString: strerror(code))
            return ConfigurationError(
                .unreadable, at: start, field: "", "cannot read the file: \(reason) (errno \(code))")
        }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw unreadable(errno) }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw unreadable(errno)
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<count])
            guard bytes.count <= largestFile else {
                throw ConfigurationError(
                    .unreadable, at: start, field: "",
                    "the file is larger than \(largestFile / 1024) KiB: a configuration is a few kilobytes"
                )
            }
        }
    }

    /// The position of the first byte that is not UTF-8, as a syntax error.
    private static func notUTF8(_ bytes: [UInt8], file: String) -> ConfigurationError {
        var iterator = bytes.makeIterator()
        var parser = Unicode.UTF8.ForwardParser()
        var line = 1
        var column = 1
        var offset = 0
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let encoded):
                offset += encoded.count
                if Unicode.UTF8.decode(encoded) == "\n" {
                    line += 1
                    column = 1
                } else {
                    column += 1
                }
            case .error, .emptyInput:
                let byte = offset < bytes.count ? " (byte 0x\(String(bytes[offset], radix: 16)))" : ""
                return ConfigurationError(
                    .syntax, at: SourceLocation(file: file, line: line, column: column), field: "",
                    "the file is not UTF-8 text\(byte)"
                )
            }
        }
    }
}
