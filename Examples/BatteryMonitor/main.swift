// The real-sensor example: one callback that reads a BLE battery level (0x2A19) from a named adapter and address
// every 30 s, through BlueZ over D-Bus. Unchanged against real hardware and against the simulator:
//
//   swift run BatteryMonitor --address AA:BB:CC:DD:EE:FF                 # the system bus, hci0, real hardware
//   eval "$(swift run keepalive simulate --private | head -1)"         # or a simulated bluetoothd (README)
//   swift run BatteryMonitor --bus "$DBUS_SYSTEM_BUS_ADDRESS" --address C0:FF:EE:00:00:01 --ticks 3
//
// Everything below the argument parsing is what an app needs: about twenty lines.
import BlueZ
import DBus
import KeepAlive
import Polling

func option(_ name: String) -> String? {
    CommandLine.arguments.firstIndex(of: name).flatMap {
        $0 + 1 < CommandLine.arguments.count ? CommandLine.arguments[$0 + 1] : nil
    }
}
let bus: DBusConnection.Bus = option("--bus").map { .address($0) } ?? .system
let sensor = Peripheral(address: option("--address") ?? "C0:FF:EE:00:00:01", adapter: option("--adapter") ?? "hci0")
let interval = Duration.seconds(Int64(option("--interval") ?? "30") ?? 30)
let ticks = option("--ticks").flatMap { UInt64($0) }

let transport = try await BlueZTransport(bus: bus)
let keepAlive = try KeepAlive(configuration: .init(interval: interval))
let battery = BluetoothUUID(assigned: 0x2A19)
let engine = try PollEngine(
    peripherals: [PeripheralSpec(name: "battery", peripheral: sensor, reads: [battery])],
    transport: transport, keepAlive: keepAlive, configuration: .init(maxTicks: ticks)
)
try await withThrowingTaskGroup { group in
    group.addTask { try await transport.run() }  // BlueZ's object tree, kept current
    try await transport.waitUntilReady(timeout: .seconds(5))
    group.addTask {
        for await record in engine.records() {
            // Readings are decoded already: `battery 51 %` (record.values keeps the raw bytes).
            let readings = record.readings.map(\.description).joined(separator: ", ")
            print("tick \(record.tick): \(record.failure.map { "failed: \($0.message)" } ?? readings)")
            if let ticks, record.tick + 1 >= ticks { return }
        }
    }
    group.addTask { try await keepAlive.run() }
    try await group.next()  // the first to end (the last tick, or an error) ends all
    group.cancelAll()
}
await engine.waitUntilDisconnected()
