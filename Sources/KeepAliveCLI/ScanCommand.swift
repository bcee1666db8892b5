import ArgumentParser
import BlueZ
import KeepAlive
import Polling
import KeepAliveDaemon
import Basics
import Logging

/// `keepalive scan`: what is advertising nearby.
struct ScanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Discover advertising devices (a live table on a terminal, JSON lines otherwise).",
        discussion: """
            Runs BlueZ discovery on the adapter for --timeout, then stops it (also on Ctrl-C). Devices BlueZ \
            already knows are listed too. Manufacturer names come from libbluetooth's company-id table.
            """
    )

    @Option(name: .long, help: "The adapter to scan with.")
    var adapter = "hci0"

    @Option(name: .long, help: "How long to scan.")
    var timeout = DurationArgument(.seconds(10))

    @Flag(name: .long, help: "JSON lines even on a terminal.")
    var json = false

    @OptionGroup var bus: BusOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        try validateAdapter(adapter)
    }

    func run() async throws {
        ignoreBrokenPipes()
        var logging = self.logging
        if logging.logLevel.level == .info { logging.logLevel = LogLevelArgument(.warning) }
        logging.bootstrap()
        let logger = Logger(label: "keepalive.scan")
        let live = standardOutputIsTerminal && !json
        let adapter = adapter
        let timeout = timeout.duration
        let table = ScanTable()
        _ = try await untilInterrupted {
            try await withBlueZ(bus: bus.resolved, adapter: adapter, logger: logger) { transport in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for try await advertisement in transport.discover(on: adapter, filter: DiscoveryFilter()) {
                            if live {
                                table.update(advertisement)
                            } else {
                                writeOut(ScanTable.jsonLine(advertisement) + "\n")
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
                    group.addTask { try await Task.sleep(for: timeout) }
                    // The timeout ends the scan; a discovery that fails (StartDiscovery refused, the adapter
                    // gone) ends it sooner, and its error is reported.
                    defer { group.cancelAll() }
                    try await group.next()
                }
            }
        }
        if live { table.redraw(final: true) }
    }
}

/// The live table: newest sighting per address, strongest signal first, redrawn in place.
final class ScanTable: Sendable {
    private struct Row {
        var advertisement: Advertisement
        var sightings: Int
    }

    private let rows = Locked<[String: Row]>([:])
    private let drawnLines = Locked(0)

    func update(_ advertisement: Advertisement) {
        rows.withLock { rows in
            var row = rows[advertisement.peripheral.address] ?? Row(advertisement: advertisement, sightings: 0)
            row.advertisement.rssi = advertisement.rssi ?? row.advertisement.rssi
            row.advertisement.name = advertisement.name ?? row.advertisement.name
            if !advertisement.serviceUUIDs.isEmpty { row.advertisement.serviceUUIDs = advertisement.serviceUUIDs }
            if !advertisement.manufacturerData.isEmpty {
                row.advertisement.manufacturerData = advertisement.manufacturerData
            }
            row.sightings += 1
            rows[advertisement.peripheral.address] = row
        }
    }

    func redraw(final: Bool = false) {
        let snapshot = rows.withLock { Array($0.values) }
            .sorted { first, second in
                let (a, b) = (first.advertisement.rssi ?? -128, second.advertisement.rssi ?? -128)
                return a != b ? a > b : first.advertisement.peripheral.address < second.advertisement.peripheral.address
            }
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

    static func jsonLine(_ advertisement: Advertisement) -> String {
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
