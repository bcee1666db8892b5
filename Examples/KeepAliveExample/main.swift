// The library example: a KeepAlive scheduler, a poll engine and a handful of simulated sensors (MockTransport
// on the real clock), printing each tick's windows and readings as they happen. No Bluetooth, no root.
//
//   swift run KeepAliveExample [--seconds N] [--interval S]
//
// Ctrl-C (SIGINT) or SIGTERM ends it gracefully: open windows expire, links are dropped, the scheduler stops.
import KeepAlive
import Polling
import KeepAliveTesting
import Logging
import ServiceLifecycle

#if canImport(Glibc)
    import Glibc
#endif

func argument(_ name: String) -> Double? {
    guard let index = CommandLine.arguments.firstIndex(of: name), index + 1 < CommandLine.arguments.count else {
        return nil
    }
    return Double(CommandLine.arguments[index + 1])
}

let interval = Duration.milliseconds(Int64((argument("--interval") ?? 2) * 1_000))
let runFor = argument("--seconds").map { Duration.milliseconds(Int64($0 * 1_000)) }

LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = .warning
    return handler
}
let logger = Logger(label: "example")

let battery = BluetoothUUID(assigned: 0x2A19)
let temperature = BluetoothUUID(assigned: 0x2A6E)
let transport = MockTransport(
    latency: .init(connect: .milliseconds(80), read: .milliseconds(10), disconnect: .milliseconds(20)))
let names = ["greenhouse-1", "greenhouse-2", "cold-room", "battery-bank", "incubator"]
var specs: [PeripheralSpec] = []
for (index, name) in names.enumerated() {
    let peripheral = Peripheral(address: "C4:7C:8D:6A:1B:2\(index)", adapter: "hci0")
    transport.add(
        peripheral,
        name: name,
        characteristics: [
            battery: .counter { UInt8(100 - ($0 / 3) % 100) },
            temperature: .counter(every: .milliseconds(250)) { UInt8(18 + index + $0 % 4) },
        ]
    )
    specs.append(
        PeripheralSpec(
            name: name,
            peripheral: peripheral,
            reads: [battery],
            notifications: index == 0 ? [.init(characteristic: temperature, duration: .milliseconds(400))] : []
        )
    )
}
// One sensor that drops its first two connections, like a device at the edge of range.
transport.script(
    .connect,
    on: specs[2].peripheral,
    .fail(
        times: 2,
        with: TransportError(.connectionAborted, "le-connection-abort-by-local", dbusName: "org.bluez.Error.Failed"))
)

let keepAlive = try KeepAlive(configuration: .init(interval: interval), logger: logger)
let engine = try PollEngine(
    peripherals: specs, transport: transport, keepAlive: keepAlive, configuration: .init(maxConnections: 3),
    logger: logger)

func hex(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}

func milliseconds(_ duration: Duration) -> String {
    "\((duration.components.seconds * 1_000) + duration.components.attoseconds / 1_000_000_000_000_000) ms"
}

/// Prints ticks and records as they arrive; listed first in the group so it is shut down last and prints the
/// records of the scheduler's own shutdown.
struct Printer: Service {
    func run() async throws {
        let records = engine.records()
        let events = keepAlive.events()
        await cancelWhenGracefulShutdown {
            await printAll(records: records, events: events)
        }
    }

    func printAll(records: AsyncStream<PollRecord>, events: AsyncStream<KeepAliveEvent>) async {
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await event in events {
                    if case .fired(let name, let tick, _, let at) = event, name == names[0] {
                        print("── tick \(tick) at \(at) ─────────────────────────────────────────")
                    }
                }
            }
            group.addTask {
                for await record in records {
                    let window =
                        record.window.map {
                            "window \($0.id) \(milliseconds($0.used))/\(milliseconds($0.budget)) \($0.outcome.rawValue)"
                        } ?? "no window"
                    var line =
                        """
                              \(record.device.padding(13)) \(record.result.rawValue.padding(8)) \(window), attempts \
                            \(record.attempts)
                            """
                    for value in record.values {
                        line += "  \(value.characteristic.shortDescription)=\(hex(value.bytes))"
                    }
                    if !record.notifications.isEmpty { line += "  +\(record.notifications.count) notifications" }
                    if let failure = record.failure { line += "  ✗ \(failure.code): \(failure.message)" }
                    print(line)
                }
            }
        }
    }
}

/// Stops the group after `--seconds`, when given.
struct Timer: Service {
    let duration: Duration?
    func run() async throws {
        guard let duration else { return try await gracefulShutdown() }
        try? await Task.sleep(for: duration)
    }
}

extension String {
    func padding(_ width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}

print(
    "KeepAlive example: \(names.count) simulated sensors, interval \(interval), at most 3 connections (Ctrl-C to stop)")
let group = ServiceGroup(
    configuration: .init(
        services: [
            .init(service: Printer()),
            .init(service: keepAlive),
            .init(service: Timer(duration: runFor), successTerminationBehavior: .gracefullyShutdownGroup),
        ],
        gracefulShutdownSignals: [.sigterm, .sigint],
        logger: logger
    )
)
try await group.run()
let stats = keepAlive.statistics
print(
    """
        stopped: \(stats.callbacksRun) polls, \(stats.failures) failed, \
        \(stats.skippedBackoff + stats.skippedOverlap) skipped, \(keepAlive.ledger.openCount) windows open, \
        \(transport.connected.count) links up
        """
)
