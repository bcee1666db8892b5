import ArgumentParser
import BlueZ
import KeepAlive
import KeepAliveDaemon
import Logging

/// `keepalive read`: one connect, read, disconnect.
struct ReadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "read",
        abstract: "Connect to one device, read characteristics, disconnect.",
        discussion: """
            Prints one line per characteristic: the UUID, the value in hex, and the value as text when it is \
            printable. The link is always disconnected, also on Ctrl-C. Exit status 1 when any read failed.

            Example: keepalive read C0:FF:EE:00:00:01 2a19 4b410002-6b65-6570-616c-697665000000
            """
    )

    @Argument(help: ArgumentHelp("The device's address, AA:BB:CC:DD:EE:FF.", valueName: "address"))
    var address: String

    @Argument(help: ArgumentHelp("Characteristics: 16-bit (2a19), 32-bit or 128-bit UUIDs.", valueName: "uuid"))
    var uuids: [String]

    @Option(name: .long, help: "The adapter to connect through.")
    var adapter = "hci0"

    @Option(name: .long, help: "Give up connecting after this long.")
    var timeout = DurationArgument(.seconds(10))

    @Flag(name: .long, help: "One JSON object per characteristic instead of text.")
    var json = false

    @OptionGroup var bus: BusOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard HostBluetooth.isValidAddress(address) else {
            throw ValidationError("'\(address)' is not a Bluetooth address like AA:BB:CC:DD:EE:FF")
        }
        guard !uuids.isEmpty else { throw ValidationError("name at least one characteristic UUID to read") }
        for uuid in uuids {
            do { _ = try BluetoothUUID(uuid) } catch { throw ValidationError("\(error)") }
        }
        try validateAdapter(adapter)
    }

    func run() async throws {
        ignoreBrokenPipes()
        var logging = self.logging
        if logging.logLevel.level == .info { logging.logLevel = LogLevelArgument(.warning) }  // one-shot: quiet unless asked
        logging.bootstrap()
        let logger = Logger(label: "keepalive.read")
        let characteristics = try uuids.map { try BluetoothUUID($0) }
        let peripheral = Peripheral(address: address.uppercased(), adapter: adapter)
        let timeout = timeout.duration
        let json = json
        let outcome = try await untilInterrupted {
            try await withBlueZ(bus: bus.resolved, adapter: peripheral.adapter, logger: logger) { transport in
                try await Self.readAll(characteristics, from: peripheral, timeout: timeout, transport: transport, json: json)
            }
        }
        guard let outcome else {
            writeOut("keepalive: interrupted\n", to: 2)
            throw ExitCode(130)
        }
        if !outcome { throw ExitCode.failure }
    }

    /// Returns whether every read succeeded.
    static func readAll(
        _ characteristics: [BluetoothUUID],
        from peripheral: Peripheral,
        timeout: Duration,
        transport: BlueZTransport,
        json: Bool
    ) async throws -> Bool {
        do {
            try await transport.connect(peripheral, options: ConnectOptions(timeout: timeout, characteristics: characteristics))
        } catch is CancellationError {
            await transport.disconnect(peripheral, timeout: .seconds(3))
            throw CancellationError()
        } catch {
            writeOut("keepalive: connect to \(peripheral.address) on \(peripheral.adapter) failed: \(error)\n", to: 2)
            return false
        }
        var allRead = true
        do {
            for characteristic in characteristics {
                try Task.checkCancellation()
                do {
                    let bytes = try await transport.read(characteristic, from: peripheral)
                    writeOut(format(characteristic, bytes, json: json) + "\n")
                } catch let error as TransportError {
                    allRead = false
                    writeOut("keepalive: read \(characteristic.shortDescription) from \(peripheral.address) failed: \(error)\n", to: 2)
                }
            }
        } catch {
            await transport.disconnect(peripheral, timeout: .seconds(3))
            throw error
        }
        await transport.disconnect(peripheral, timeout: .seconds(3))
        return allRead
    }

    static func format(_ characteristic: BluetoothUUID, _ bytes: [UInt8], json: Bool) -> String {
        let hex = bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        let printable = !bytes.isEmpty && bytes.allSatisfy { (0x20..<0x7F).contains($0) }
        let text = printable ? String(decoding: bytes, as: UTF8.self) : nil
        if json {
            var line = "{\"uuid\":\"\(characteristic.shortDescription)\",\"hex\":\"\(hex)\""
            if let text { line += ",\"text\":" + JSONText.quoted(text) }
            return line + "}"
        }
        var line = "\(characteristic.shortDescription)  \(hex.isEmpty ? "(empty)" : hex)"
        if let text { line += "  \"\(text)\"" }
        return line
    }
}
