// bluez-sim: a simulated bluetoothd 5.66 on a D-Bus bus, for bleak, bluetoothctl and the keep-alive daemon.
//
//   bluez-sim [--address ADDRESS | --private] [--devices N] [--time-scale X] [--no-battery-plugin]
//             [--quirk services-before-gatt|no-connected-signal]… [--adverts]
//
// --private starts its own dbus-daemon and prints `DBUS_SYSTEM_BUS_ADDRESS=…`, then `READY`. Runs until
// SIGTERM or SIGINT, then stops cleanly (and kills the private daemon).

import BlueZSimulator
import DBus
import LocalServices
import Dispatch
import Logging

#if canImport(Glibc)
    import Glibc
#endif

struct Options {
    var address: String?
    var privateBus = false
    var devices = 3
    var timeScale = 1.0
    var quirks: Set<BlueZSimulator.Quirk> = []
    var batteryPlugin = true
    var hostile = false
    var seed: UInt64 = 1
    var adverts = false

    static let usage = """
        usage: bluez-sim [--address ADDRESS | --private] [--devices N] [--time-scale X] [--no-battery-plugin]
                         [--quirk services-before-gatt|no-connected-signal]... [--hostile [--seed N]] [--adverts]
          --hostile  an org.bluez that gets every type wrong (wrong property types, wrong reply signatures,
                     malformed signals), seeded: a client must report typed errors and never trap
          --adverts  add passive sensors that advertise while discovering (BTHome, BTHome encrypted, pvvx,
                     MiBeacon, Ruuvi: C0:FF:EE:02:00:01 to :05, see [SimulatedDevice].advertisingSensors)
        """

    static func parse(_ arguments: [String]) throws(UsageError) -> Options {
        var options = Options()
        var remaining = arguments[...]
        func value(for flag: String) throws(UsageError) -> String {
            guard let value = remaining.popFirst() else { throw UsageError("\(flag) needs a value") }
            return value
        }
        while let argument = remaining.popFirst() {
            switch argument {
            case "--address": options.address = try value(for: argument)
            case "--private": options.privateBus = true
            case "--devices":
                let text = try value(for: argument)
                guard let count = Int(text), count >= 0, count <= 65_535 else {
                    throw UsageError("--devices needs a count from 0 to 65535, not '\(text)'")
                }
                options.devices = count
            case "--time-scale":
                let text = try value(for: argument)
                guard let scale = Double(text), scale > 0 else {
                    throw UsageError("--time-scale needs a positive number, not '\(text)'")
                }
                options.timeScale = scale
            case "--quirk":
                let text = try value(for: argument)
                guard let quirk = BlueZSimulator.Quirk(rawValue: text) else {
                    let known = BlueZSimulator.Quirk.allCases.map(\.rawValue).joined(separator: ", ")
                    throw UsageError("unknown quirk '\(text)' (known: \(known))")
                }
                options.quirks.insert(quirk)
            case "--no-battery-plugin": options.batteryPlugin = false
            case "--hostile": options.hostile = true
            case "--adverts": options.adverts = true
            case "--seed":
                let text = try value(for: argument)
                guard let seed = UInt64(text) else { throw UsageError("--seed needs a whole number, not '\(text)'") }
                options.seed = seed
            case "-h", "--help": throw UsageError(nil)
            default: throw UsageError("unknown argument '\(argument)'")
            }
        }
        if options.address != nil, options.privateBus { throw UsageError("--address and --private exclude each other") }
        return options
    }
}

struct UsageError: Error {
    var message: String?
    init(_ message: String?) { self.message = message }
}

/// Writes straight to a file descriptor: stdout is read line by line by scripts waiting for `READY`.
func write(_ text: String, to descriptor: Int32) {
    var bytes = Array(text.utf8)
    while !bytes.isEmpty {
        let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        if written < 0, errno == EINTR { continue }
        guard written > 0 else { return }
        bytes.removeFirst(written)
    }
}

func writeLine(_ text: String) { write(text + "\n", to: STDOUT_FILENO) }

/// SIGTERM and SIGINT, delivered through DispatchSources (the default actions are switched off).
final class TerminationSignals: @unchecked Sendable {
    // @unchecked Sendable: `sources` is set once in init and only kept alive afterwards.
    let stream: AsyncStream<Int32>
    private let sources: [any DispatchSourceSignal]

    init() {
        let (stream, continuation) = AsyncStream<Int32>.makeStream()
        self.stream = stream
        sources = [SIGTERM, SIGINT].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            return source
        }
    }
}

LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = .info
    return handler
}

let options: Options
do {
    options = try Options.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    if let message = error.message {
        write("bluez-sim: \(message)\n\(Options.usage)\n", to: STDERR_FILENO)
        exit(2)
    }
    writeLine(Options.usage)
    exit(0)
}

let signals = TerminationSignals()
var privateBus: PrivateBus?
do {
    let bus: DBusConnection.Bus
    if options.privateBus {
        let started = try PrivateBus.start()
        privateBus = started
        bus = .address(started.address)
        writeLine("DBUS_SYSTEM_BUS_ADDRESS=\(started.address)")
    } else if let address = options.address {
        bus = .address(address)
    } else {
        bus = .system
    }
    let devices: [SimulatedDevice] = .sensors(count: options.devices) + (options.adverts ? .advertisingSensors() : [])
    let stop: () async -> Void
    if options.hostile {
        let hostile = try await HostileBlueZ.start(on: bus, devices: devices.map(\.address), seed: options.seed)
        stop = { await hostile.stop() }
    } else {
        let configuration = BlueZSimulator.Configuration(
            adapters: ["hci0"], devices: devices, timeScale: options.timeScale,
            quirks: options.quirks, batteryPlugin: options.batteryPlugin)
        let simulator = try await BlueZSimulator.start(on: bus, configuration: configuration)
        stop = { await simulator.stop() }
    }
    writeLine("READY")
    for await number in signals.stream {
        Logger(label: "bluez-sim").info("signal \(number): stopping")
        break
    }
    await stop()
    privateBus?.stop()
    exit(0)
} catch {
    write("bluez-sim: \(error)\n", to: STDERR_FILENO)
    privateBus?.stop()
    exit(1)
}
