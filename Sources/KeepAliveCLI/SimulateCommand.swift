import ArgumentParser
import BlueZSimulator
import DBus
import LocalServices
import Logging

/// `keepalive simulate`: the BlueZ simulator, for trying the daemon, scripts and other BlueZ clients without
/// hardware.
struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Run a simulated bluetoothd 5.66 (org.bluez) with N sensors.",
        discussion: """
            With --private it starts its own dbus-daemon and prints the line \
            `DBUS_SYSTEM_BUS_ADDRESS=…` to use, then `READY`. Sensors are C0:FF:EE:00:00:01, … with Battery \
            (2a19), Temperature (2a6e) and a keep-alive service (counter 4b410002-…, notifying every 100 ms). \
            Runs until SIGTERM or Ctrl-C. Faults are injected at start and can be injected later over \
            D-Bus on io.keepalive.Simulator1 (/io/keepalive/Simulator).

            With --profiles, five sensors that speak real profiles join them: C0:FF:EE:01:00:01 Mi Flora \
            (write A0 1F to 1a00, then read 1a01), :02 LYWSD03MMC (notifications on ebe0ccc1-…), :03 \
            Environmental Sensing (2a6e −7.25 °C, 2a6f, and a vendor temperature with a 0x2904 descriptor), \
            :04 heart rate (2a37), :05 health thermometer (2a1c).

            With --adverts, five passive sensors advertise while the adapter discovers (one advertisement a \
            second, times --time-scale; a new measurement every third): C0:FF:EE:02:00:01 BTHome v2, :02 BTHome \
            v2 encrypted, :03 pvvx custom, :04 MiBeacon v5 encrypted (LYWSD03MMC), :05 RuuviTag RAWv2. Their \
            names, formats and keys are printed before READY.

            Faults: connect-abort[=COUNT], in-progress, read-hang, att-error[=CODE], absent, vanish, power-off, \
            silent-notifications; \
            e.g. --fault connect-abort=2@C0:FF:EE:00:00:01
            """
    )

    @Option(name: .long, help: "How many sensors (0-65535).")
    var devices = 3

    @Flag(
        name: .long,
        help: "Add the profile sensors (Mi Flora, LYWSD03MMC, Environmental Sensing, heart rate, thermometer).")
    var profiles = false

    @Flag(
        name: .long,
        help:
            "Add passive sensors that advertise (BTHome, BTHome encrypted, pvvx, MiBeacon, Ruuvi) and print their keys."
    )
    var adverts = false

    @OptionGroup var bus: BusOptions

    @Flag(name: .long, help: "Start a private dbus-daemon and print its address.")
    var `private` = false

    @Option(name: .long, help: ArgumentHelp("Inject a fault: NAME[=VALUE]@ADDRESS (repeatable).", valueName: "fault"))
    var fault: [String] = []

    @Option(name: .long, help: "Speed up (<1) or slow down (>1) the simulated latencies.")
    var timeScale = 1.0

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Imitate a real-BlueZ quirk: services-before-gatt, no-connected-signal (repeatable).", valueName: "quirk"))
    var quirk: [String] = []

    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard (0...65_535).contains(devices) else { throw ValidationError("--devices must be from 0 to 65535") }
        guard timeScale.isFinite, timeScale >= 0.001, timeScale <= 1_000 else {
            throw ValidationError("--time-scale must be a number from 0.001 to 1000")
        }
        if `private`, bus.bus != nil { throw ValidationError("--bus and --private exclude each other") }
        for text in quirk where BlueZSimulator.Quirk(rawValue: text) == nil {
            let known = BlueZSimulator.Quirk.allCases.map(\.rawValue).joined(separator: ", ")
            throw ValidationError("unknown quirk '\(text)' (known: \(known))")
        }
        for text in fault { _ = try Self.parseFault(text) }
    }

    static func parseFault(_ text: String) throws -> (BlueZSimulator.Fault, String) {
        let parts = text.split(separator: "@", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { throw ValidationError("--fault '\(text)' needs NAME[=VALUE]@ADDRESS") }
        let nameAndValue = parts[0].split(separator: "=", maxSplits: 1).map(String.init)
        var options: [String: DBusValue] = [:]
        if nameAndValue.count == 2 {
            guard
                let value = UInt32(
                    nameAndValue[1].hasPrefix("0x") ? String(nameAndValue[1].dropFirst(2)) : nameAndValue[1],
                    radix: nameAndValue[1].hasPrefix("0x") ? 16 : 10)
            else {
                throw ValidationError("--fault '\(text)': '\(nameAndValue[1])' is not a number")
            }
            options = nameAndValue[0] == "att-error" ? ["code": .uint32(value)] : ["count": .uint32(value)]
        }
        do {
            return (try BlueZSimulator.Fault(name: nameAndValue[0], options: options), parts[1].uppercased())
        } catch {
            throw ValidationError("--fault '\(text)': \(error)")
        }
    }

    /// The passive sensors among `devices`, a line each, for a user to copy into a configuration.
    static func advertisersText(_ devices: [SimulatedDevice]) -> String {
        let rows = devices.compactMap { device -> [String]? in
            guard let advertisement = device.advertisement else { return nil }
            return [
                device.name ?? "-", device.address, advertisement.kind.rawValue, advertisement.kind.formatName,
                advertisement.keyHex.map { "key " + $0 } ?? "",
            ]
        }
        var widths = [Int](repeating: 0, count: 5)
        for row in rows { for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) } }
        var text = "advertising sensors (name, address, kind, format, key):\n"
        for row in rows {
            let cells = row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] - cell.count)
            }
            text += "  " + cells.joined(separator: "  ").withoutTrailingSpaces() + "\n"
        }
        return text
    }

    func run() async throws {
        ignoreBrokenPipes()
        logging.bootstrap()
        let logger = Logger(label: "keepalive.simulate")
        var privateBus: PrivateBus?
        defer { privateBus?.stop() }
        let target: DBusConnection.Bus
        if `private` {
            let started = try PrivateBus.start()
            privateBus = started
            target = .address(started.address)
            writeOut("DBUS_SYSTEM_BUS_ADDRESS=\(started.address)\n")
        } else {
            target = bus.resolved
        }
        let configuration = BlueZSimulator.Configuration(
            adapters: ["hci0"],
            devices: .sensors(count: devices) + (profiles ? .profileSensors() : [])
                + (adverts ? .advertisingSensors() : []),
            timeScale: timeScale,
            quirks: Set(quirk.compactMap(BlueZSimulator.Quirk.init(rawValue:)))
        )
        let simulator: BlueZSimulator
        do {
            simulator = try await BlueZSimulator.start(on: target, configuration: configuration, logger: logger)
        } catch {
            throw CommandFailure("cannot own org.bluez on \(target): \(error)")
        }
        for text in fault {
            let (fault, address) = try Self.parseFault(text)
            do {
                try await simulator.inject(fault, device: address)
            } catch {
                await simulator.stop()
                throw CommandFailure("--fault '\(text)': \(error)")
            }
        }
        if adverts { writeOut(Self.advertisersText(configuration.devices)) }
        _ = try await untilInterrupted(caught: { writeOut("READY\n") }) {
            try await Task.sleep(for: .seconds(100 * 365 * 86_400))
        }
        logger.info("stopping")
        await simulator.stop()
    }
}

extension String {
    /// Without the spaces at its end.
    fileprivate func withoutTrailingSpaces() -> String {
        var text = self
        while text.last == " " { text.removeLast() }
        return text
    }
}
