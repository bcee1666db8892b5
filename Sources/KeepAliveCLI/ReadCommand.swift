import Basics
import ArgumentParser
import BlueZ
import KeepAlive
import Polling
import KeepAliveDaemon
import Readings
import Logging

/// `keepalive read`: one connect, read, disconnect.
struct ReadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "read",
        abstract: "Connect to one device, read characteristics, disconnect.",
        discussion: """
            Prints one line per characteristic: the UUID, the value in hex, and its readings (numbers with units, \
            decoded as a poll would: the SIG table, else the 0x2904 descriptor, else the text when printable). \
            With --profile, the profile's writes come first and its layouts decode its characteristics; with no \
            UUID, its reads are read. The link is always disconnected, also on Ctrl-C. Exit status 1 when any \
            read failed.

            Examples: keepalive read C0:FF:EE:00:00:01 2a19 4b410002-6b65-6570-616c-697665000000
                      keepalive read C4:7C:8D:6A:1B:22 --profile mi-flora
            """
    )

    @Argument(help: ArgumentHelp("The device's address, AA:BB:CC:DD:EE:FF.", valueName: "address"))
    var address: String

    @Argument(help: ArgumentHelp("Characteristics: 16-bit (2a19), 32-bit or 128-bit UUIDs.", valueName: "uuid"))
    var uuids: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp(
            "A device profile (`keepalive profiles`): its writes first, its decoding.", valueName: "name"))
    var profile: String?

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
        guard !uuids.isEmpty || profile != nil else {
            throw ValidationError("name at least one characteristic UUID to read, or a --profile")
        }
        if let profile, (try? DeviceProfile.named(profile)) == nil {
            let known = ((try? DeviceProfile.builtIn().get()) ?? []).map(\.name).joined(separator: ", ")
            throw ValidationError("unknown profile '\(profile)' (profiles: \(known))")
        }
        for uuid in uuids {
            do { _ = try BluetoothUUID(uuid) } catch { throw ValidationError("\(error)") }
        }
        try validateAdapter(adapter)
    }

    func run() async throws {
        ignoreBrokenPipes()
        var logging = self.logging
        // One-shot: quiet unless asked.
        if logging.logLevel.level == .info { logging.logLevel = LogLevelArgument(.warning) }
        logging.bootstrap()
        let logger = Logger(label: "keepalive.read")
        let peripheral = Peripheral(address: address.uppercased(), adapter: adapter)
        let chosen = try profile.flatMap { try DeviceProfile.named($0) }
        let named = try uuids.map { try BluetoothUUID($0) }
        let spec = PeripheralSpec(
            name: "read", peripheral: peripheral, writes: chosen?.writes ?? [],
            reads: named.isEmpty ? chosen?.reads ?? [] : named, decoding: chosen?.decoding ?? [:]
        )
        let timeout = timeout.duration
        let json = json
        let outcome = try await untilInterrupted {
            try await withBlueZ(bus: bus.resolved, adapter: peripheral.adapter, logger: logger) { transport in
                try await Self.readAll(spec, timeout: timeout, transport: transport, json: json)
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
        _ spec: PeripheralSpec,
        timeout: Duration,
        transport: BlueZTransport,
        json: Bool
    ) async throws -> Bool {
        let peripheral = spec.peripheral
        do {
            try await transport.connect(
                peripheral, options: ConnectOptions(timeout: timeout, characteristics: spec.characteristics))
        } catch is CancellationError {
            await transport.disconnect(peripheral, timeout: .seconds(3))
            throw CancellationError()
        } catch {
            writeOut("keepalive: connect to \(peripheral.address) on \(peripheral.adapter) failed: \(error)\n", to: 2)
            return false
        }
        var allRead = true
        do {
            for write in spec.writes {
                do {
                    try await transport.write(write.value, to: write.characteristic, of: peripheral, type: write.type)
                } catch let error as TransportError {
                    writeOut(
                        """
                            keepalive: write to \(write.characteristic.shortDescription) of \(peripheral.address) \
                            failed: \(error)\n
                            """,
                        to: 2)
                    allRead = false
                }
            }
            for characteristic in spec.reads {
                try Task.checkCancellation()
                do {
                    let bytes = try await transport.read(characteristic, from: peripheral)
                    // The same decoding as a poll's: the SIG table, else the 0x2904 descriptor, else hex.
                    var presentation: PresentationFormat?
                    if characteristic.assignedNumber.flatMap(SIGCharacteristics.entry) == nil,
                        let descriptor = try? await transport.presentationFormat(of: characteristic, from: peripheral)
                    {
                        presentation = try? PresentationFormat(descriptor: descriptor)
                    }
                    let readings = ReadingsDecoder.decode(
                        bytes, as: spec.decoding(of: characteristic, presentation: presentation))
                    writeOut(format(characteristic, bytes, readings: readings, json: json) + "\n")
                } catch let error as TransportError {
                    allRead = false
                    writeOut(
                        """
                            keepalive: read \(characteristic.shortDescription) from \(peripheral.address) failed: \
                            \(error)\n
                            """,
                        to: 2)
                }
            }
        } catch {
            await transport.disconnect(peripheral, timeout: .seconds(3))
            throw error
        }
        await transport.disconnect(peripheral, timeout: .seconds(3))
        return allRead
    }

    /// `2a19  33  battery 51 %`, or one JSON object with the hex, the printable text and the readings.
    static func format(_ characteristic: BluetoothUUID, _ bytes: [UInt8], readings: [Reading], json: Bool) -> String {
        let hex = Hex.string(bytes)
        let printable = !bytes.isEmpty && bytes.allSatisfy { (0x20..<0x7F).contains($0) }
        let text = printable ? String(decoding: bytes, as: UTF8.self) : nil
        if json {
            var line = "{\"uuid\":\"\(characteristic.shortDescription)\",\"hex\":\"\(hex)\""
            if let text { line += ",\"text\":" + JSONText.quoted(text) }
            return line + ",\"readings\":" + JSONText.readings(readings) + "}"
        }
        var line = "\(characteristic.shortDescription)  \(hex.isEmpty ? "(empty)" : hex)"
        // A value shown as hex only would say its hex twice.
        let decoded = readings.filter { !($0.value == .text(hex) && $0.unit == nil) }
        if !decoded.isEmpty { line += "  " + decoded.map(\.description).joined(separator: "  ") }
        if let text, decoded.isEmpty { line += "  \"\(text)\"" }
        return line
    }
}
