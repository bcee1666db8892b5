import ArgumentParser
import BlueZ
import KeepAlive
import Polling
import KeepAliveDaemon
import Basics
import LibCrypto
import Logging
import Readings

#if canImport(Glibc)
    import Glibc
#endif

/// `keepalive scan`: what is advertising nearby, what the sensors among it say, and (`--suggest`) how to configure
/// them.
struct ScanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Discover advertising devices (a live table on a terminal, JSON lines otherwise).",
        discussion: """
            Runs BlueZ discovery on the adapter for --timeout, then stops it (also on Ctrl-C). Devices BlueZ \
            already knows are listed too. Manufacturer names come from libbluetooth's company-id table. \
            Advertisements in BTHome, pvvx, ATC1441, MiBeacon and Ruuvi RAWv2 formats are decoded; encrypted ones \
            need the device's key (--key). With --suggest, scan prints configuration entries for the sensors it \
            recognises, to paste under `devices:` in the daemon's YAML.
            """
    )

    @Option(name: .long, help: "The adapter to scan with.")
    var adapter = "hci0"

    @Option(name: .long, help: "How long to scan.")
    var timeout = DurationArgument(.seconds(10))

    @Flag(name: .long, help: "JSON lines even on a terminal.")
    var json = false

    @Flag(name: .long, help: "Print configuration entries for the recognised sensors when the scan ends.")
    var suggest = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "A device's key to decrypt its advertisements (repeatable).", valueName: "ADDRESS=32-HEX-DIGITS"))
    var key: [String] = []

    @OptionGroup var bus: BusOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        try validateAdapter(adapter)
        if json && suggest { throw ValidationError("--json and --suggest do not mix: --suggest prints YAML") }
        _ = try keys()
    }

    /// `--key` as address → key. Never echoes a key in an error.
    func keys() throws -> [String: AdvertisementKey] {
        var keys: [String: AdvertisementKey] = [:]
        for argument in key {
            let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, HostBluetooth.isValidAddress(parts[0]) else {
                throw ValidationError("--key wants ADDRESS=KEY, like A4:C1:38:8D:18:B2=<32 hex digits>")
            }
            do {
                keys[parts[0].uppercased()] = try AdvertisementKey(hex: parts[1])
            } catch {
                throw ValidationError("--key for \(parts[0].uppercased()): \(error.message)")
            }
        }
        return keys
    }

    func run() async throws {
        ignoreBrokenPipes()
        var logging = self.logging
        if logging.logLevel.level == .info { logging.logLevel = LogLevelArgument(.warning) }
        logging.bootstrap()
        let logger = Logger(label: "keepalive.scan")
        let live = standardOutputIsTerminal && !json && !suggest
        let (adapter, suggest) = (adapter, suggest)
        let timeout = timeout.duration
        let keys = try keys()
        // libcrypto is loaded only when an encrypted advertisement from a device with a key is opened.
        let decoder = AdvertisementDecoder(cipher: keys.isEmpty ? nil : LibCryptoAESCCM())
        let survey = ScanSurvey()
        let table = ScanTable(survey: survey, decoder: decoder, keys: keys)
        if suggest && isatty(STDERR_FILENO) == 1 {
            writeOut(
                "keepalive: listening on \(adapter) for \(timeout.compact) (Ctrl-C to stop sooner)…\n",
                to: STDERR_FILENO)
        }
        _ = try await untilInterrupted {
            try await withBlueZ(bus: bus.resolved, adapter: adapter, logger: logger) { transport in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        try await survey.listen(to: transport, on: adapter, for: timeout) { advertisement in
                            if !live && !suggest {
                                writeOut(ScanTable.jsonLine(advertisement, decoder: decoder, keys: keys) + "\n")
                            }
                        }
                    }
                    if live {
                        group.addTask {
                            while !Task.isCancelled {
                                table.redraw()
                                try await Task.sleep(for: .milliseconds(250))
                            }
                        }
                    }
                    // The scan's end (or its failure) ends the redrawing too.
                    defer { group.cancelAll() }
                    try await group.next()
                }
            }
        }
        if live { table.redraw(final: true) }
        if suggest { writeOut(Self.suggestions(survey.devices, decoder: decoder, keys: keys, adapter: adapter)) }
    }

    /// The `--suggest` output: a header saying what was found, then the entries.
    static func suggestions(
        _ devices: [ScanSurvey.Device], decoder: AdvertisementDecoder, keys: [String: AdvertisementKey],
        adapter: String
    ) -> String {
        let suggestions = devices.compactMap { device in
            ScanSuggestions.suggestion(
                for: device.advertisement,
                payloads: ScanDecoding.decode(device.advertisement, decoder: decoder, keys: keys))
        }
        let heard = "\(devices.count) device\(devices.count == 1 ? "" : "s") heard on \(adapter)"
        guard !suggestions.isEmpty else { return "# \(heard), none recognised: no entries to suggest.\n" }
        let keys = suggestions.contains {
            if case .advertisements(_, keyNeeded: true) = $0.source { true } else { false }
        }
        return "# \(heard), \(suggestions.count) recognised. Paste these entries under `devices:`"
            + (keys ? " (and fill in each <32 hex> key)" : "") + ".\n" + ScanSuggestions.yaml(suggestions)
    }
}

/// The live table: newest sighting per address, strongest signal first, redrawn in place; under a sensor whose
/// advertisements decode, what they say.
final class ScanTable: Sendable {
    private let survey: ScanSurvey
    private let decoder: AdvertisementDecoder
    private let keys: [String: AdvertisementKey]
    private let drawnLines = Locked(0)

    init(survey: ScanSurvey, decoder: AdvertisementDecoder, keys: [String: AdvertisementKey]) {
        self.survey = survey
        self.decoder = decoder
        self.keys = keys
    }

    func redraw(final: Bool = false) {
        let snapshot = survey.devices
        var lines = [
            "ADDRESS            RSSI  NAME                  MANUFACTURER               SERVICES"
        ]
        for row in snapshot {
            let advertisement = row.advertisement
            let rssi = advertisement.rssi.map { String($0) } ?? "—"
            lines.append(
                advertisement.peripheral.address.padded(19) + rssi.padded(6, left: true) + "  "
                    + JSONText.printable(advertisement.name ?? "").truncated(21).padded(22)
                    + Self.manufacturer(advertisement).truncated(26).padded(27)
                    + advertisement.serviceUUIDs.map(\.shortDescription).joined(separator: " ")
            )
            for payload in ScanDecoding.decode(advertisement, decoder: decoder, keys: keys) {
                lines.append("    " + ScanDecoding.line(payload))
            }
        }
        lines.append(
            "\(snapshot.count) device\(snapshot.count == 1 ? "" : "s")\(final ? "" : " … scanning (Ctrl-C to stop)")")
        let previous = drawnLines.withLock { drawn in
            defer { drawn = lines.count }
            return drawn
        }
        let up = previous > 0 ? "\u{1B}[\(previous)F\u{1B}[J" : ""
        writeOut(up + lines.joined(separator: "\n") + "\n")
    }

    static func manufacturer(_ advertisement: Advertisement) -> String {
        guard let identifier = advertisement.manufacturerData.keys.min() else { return "" }
        return HostBluetooth.companyName(identifier) ?? String(format4Hex: identifier)
    }

    /// One sighting as a JSON line; `service_data` and `decoded` (``ScanDecoding/json(_:)``) only when it has some.
    static func jsonLine(
        _ advertisement: Advertisement, decoder: AdvertisementDecoder = AdvertisementDecoder(),
        keys: [String: AdvertisementKey] = [:]
    ) -> String {
        var fields = [
            "\"address\":\"\(advertisement.peripheral.address)\"",
            "\"adapter\":\"\(advertisement.peripheral.adapter)\"",
        ]
        fields.append("\"name\":" + (advertisement.name.map(JSONText.quoted) ?? "null"))
        fields.append("\"rssi\":" + (advertisement.rssi.map { String($0) } ?? "null"))
        fields.append(
            "\"services\":[" + advertisement.serviceUUIDs.map { "\"\($0.shortDescription)\"" }.joined(separator: ",")
                + "]")
        let manufacturers = advertisement.manufacturerData.keys.sorted().map { identifier in
            let name = HostBluetooth.companyName(identifier).map(JSONText.quoted) ?? "null"
            let data = Hex.string(advertisement.manufacturerData[identifier, default: []])
            return "{\"id\":\(identifier),\"name\":\(name),\"hex\":\"\(data)\"}"
        }
        fields.append("\"manufacturers\":[" + manufacturers.joined(separator: ",") + "]")
        if !advertisement.serviceData.isEmpty {
            let data = advertisement.serviceData.keys.sorted().map { uuid in
                let hex = Hex.string(advertisement.serviceData[uuid, default: []])
                return "{\"uuid\":\"\(uuid.shortDescription)\",\"hex\":\"\(hex)\"}"
            }
            fields.append("\"service_data\":[" + data.joined(separator: ",") + "]")
        }
        let payloads = ScanDecoding.decode(advertisement, decoder: decoder, keys: keys)
        if !payloads.isEmpty { fields.append("\"decoded\":" + ScanDecoding.json(payloads)) }
        return "{" + fields.joined(separator: ",") + "}"
    }
}

extension String {
    init(format4Hex value: UInt16) {
        let hex = String(value, radix: 16)
        self = "0x" + String(repeating: "0", count: 4 - hex.count) + hex
    }

    func padded(_ width: Int, left: Bool = false) -> String {
        guard count < width else { return self }
        let padding = String(repeating: " ", count: width - count)
        return left ? padding + self : self + padding
    }

    func truncated(_ width: Int) -> String {
        count <= width ? self : String(prefix(width - 1)) + "…"
    }
}
