// BlueZTransport's client cost: connect → read one characteristic → disconnect for N devices, at most three
// at a time (the poll engine's default), against whatever org.bluez is on DBUS_SYSTEM_BUS_ADDRESS (the
// simulator in `Benchmarks/bluez-bench/run.sh`, which runs bleak on the same devices in the same run).
//
//   BlueZBenchmark N [ROUNDS]   → prints one line: n=… cpu_us_per_device=… wall_ms_per_round=… failures=…
#if canImport(Glibc)
import Glibc
#endif
import BlueZ
import DBus
import KeepAlive
import Logging

func cpuMicroseconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6 + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
}

let arguments = CommandLine.arguments
guard arguments.count >= 2, let count = Int(arguments[1]), count > 0 else {
    print("usage: BlueZBenchmark N [ROUNDS]")
    exit(2)
}
let rounds = arguments.count >= 3 ? Int(arguments[2]) ?? 3 : 3
let logger = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
let counter = try BluetoothUUID("4b410002-6b65-6570-616c-697665000000")

let connection = try await DBusConnection(bus: .system)
let transport = BlueZTransport(connection: connection, logger: logger)
let cacheTask = Task { try await transport.run() }
try await transport.cache.waitUntilReady(timeout: .seconds(10))

let peripherals = (1...count).map { number in
    Peripheral(address: "C0:FF:EE:00:" + hex(UInt8(number >> 8)) + ":" + hex(UInt8(number & 0xFF)), adapter: "hci0")
}

func hex(_ byte: UInt8) -> String {
    (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
}

/// One round: every device polled once, three at a time.
func round() async -> Int {
    await withTaskGroup(of: Bool.self) { group in
        var next = 0
        var failures = 0
        func start() {
            guard next < peripherals.count else { return }
            let peripheral = peripherals[next]
            next += 1
            group.addTask {
                do {
                    try await transport.connect(peripheral, options: ConnectOptions(timeout: .seconds(10), characteristics: [counter]))
                    _ = try await transport.read(counter, from: peripheral)
                    await transport.disconnect(peripheral, timeout: .seconds(5))
                    return true
                } catch {
                    await transport.disconnect(peripheral, timeout: .seconds(5))
                    return false
                }
            }
        }
        for _ in 0..<3 { start() }
        while let ok = await group.next() {
            if !ok { failures += 1 }
            start()
        }
        return failures
    }
}

_ = await round()  // warm-up: first connections resolve GATT, caches fill
let cpuStart = cpuMicroseconds()
let wallStart = ContinuousClock.now
var failures = 0
for _ in 0..<rounds { failures += await round() }
let wall = ContinuousClock.now - wallStart
let cpu = cpuMicroseconds() - cpuStart
let wallMilliseconds = Double(wall.components.seconds) * 1e3 + Double(wall.components.attoseconds) / 1e15
print("n=\(count) cpu_us_per_device=\(Int(cpu / Double(count * rounds))) wall_ms_per_round=\(Int(wallMilliseconds / Double(rounds))) failures=\(failures)")
cacheTask.cancel()
