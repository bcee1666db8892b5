// BlueZTransport's client cost: connect → read one characteristic → disconnect for N devices, at most three
// at a time (the poll engine's default), against whatever org.bluez is on DBUS_SYSTEM_BUS_ADDRESS (the
// simulator in `Benchmarks/bluez-bench/run.sh`, which runs bleak on the same devices in the same run).
//
//   BlueZBenchmark N [ROUNDS]   → prints one line: n=… cpu_us_per_device=… wall_ms_per_round=… failures=…
//   BlueZBenchmark --sync [REPEATS] → the object cache's first sync of BlueZ's whole tree (issue #8): a new
//     connection each time, then BlueZTransport.run() until the cache is ready (match rules, GetManagedObjects,
//     the cache built); then a bare GetManagedObjects decoded into DBusValues on the same connection, to tell the
//     D-Bus decode from the cache's own work. Medians: sync_ms=… sync_cpu_us=… gmo_ms=… gmo_cpu_us=… devices=…
#if canImport(Glibc)
    import Glibc
#endif
import BlueZ
import DBus
import KeepAlive
import Polling
import Logging

func cpuMicroseconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
}

let arguments = CommandLine.arguments
if arguments.count >= 2, arguments[1] == "--sync" {
    let repeats = arguments.count >= 3 ? Int(arguments[2]) ?? 3 : 3
    let quiet = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
    var syncs: [(wall: Double, cpu: Double, gmoWall: Double, gmoCPU: Double, devices: Int)] = []
    for _ in 0..<repeats {
        let connection = try await DBusConnection(bus: .system)
        let transport = BlueZTransport(connection: connection, logger: quiet)
        let cpuStart = cpuMicroseconds()
        let start = ContinuousClock.now
        let cacheTask = Task { try await transport.run() }
        try await transport.waitUntilReady(timeout: .seconds(120))
        let wall = ContinuousClock.now - start
        let cpu = cpuMicroseconds() - cpuStart
        let devices = transport.cache.devices().count
        let gmoCPUStart = cpuMicroseconds()
        let gmoStart = ContinuousClock.now
        let tree = try await connection.getManagedObjects(destination: "org.bluez", timeout: .seconds(120))
        let gmoWall = ContinuousClock.now - gmoStart
        let gmoCPU = cpuMicroseconds() - gmoCPUStart
        precondition(tree.count >= devices)
        cacheTask.cancel()
        _ = try? await cacheTask.value
        await connection.close()
        func milliseconds(_ duration: Duration) -> Double {
            Double(duration.components.seconds) * 1e3 + Double(duration.components.attoseconds) / 1e15
        }
        syncs.append((milliseconds(wall), cpu, milliseconds(gmoWall), gmoCPU, devices))
    }
    func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
    func text(_ value: Double) -> String {
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }
    print(
        """
            sync repeats=\(repeats) sync_ms=\(text(median(syncs.map(\.wall)))) \
            sync_cpu_us=\(Int(median(syncs.map(\.cpu))))
            """
            + " gmo_ms=\(text(median(syncs.map(\.gmoWall)))) gmo_cpu_us=\(Int(median(syncs.map(\.gmoCPU))))"
            + " devices=\(syncs.last?.devices ?? 0)"
    )
    exit(0)
}

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
try await transport.waitUntilReady(timeout: .seconds(10))

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
                    try await transport.connect(
                        peripheral, options: ConnectOptions(timeout: .seconds(10), characteristics: [counter]))
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
print(
    """
        n=\(count) cpu_us_per_device=\(Int(cpu / Double(count * rounds))) \
        wall_ms_per_round=\(Int(wallMilliseconds / Double(rounds))) failures=\(failures)
        """
)
cacheTask.cancel()
