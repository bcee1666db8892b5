// BlueZTransport's client cost: connect → read one characteristic → disconnect for N devices, at most three
// at a time (the poll engine's default), against whatever org.bluez is on DBUS_SYSTEM_BUS_ADDRESS (the
// simulator in `Benchmarks/bluez-bench/run.sh`, which runs bleak on the same devices in the same run).
//
//   BlueZBenchmark N [ROUNDS]   → prints one line: n=… cpu_us_per_device=… wall_ms_per_round=… failures=…
//   BlueZBenchmark --link POLLS [--every SECONDS] ADDRESS… → link time (issue #35): POLLS polls one after another,
//     round robin over the addresses (on hci0, after one warm-up poll each), each starting SECONDS after the last
//     one started (default 0: back to back), connect → read the counter → disconnect, one line each:
//     `poll address=… warmup=0|1 connect_ns=… read_ns=… disconnect_ns=… returned_ns=… reported_ns=… ok=1`, the
//     instants on CLOCK_MONOTONIC (what Python's time.monotonic_ns reads, so `link_time.py`'s observer can be
//     compared with them): the connect call, the read done, the disconnect call, disconnect returned;
//     `reported_ns` is BlueZTransport.linkTime(of:) once disconnect returned (-1: nil).
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

if arguments.count >= 4, arguments[1] == "--link", let polls = Int(arguments[2]), polls > 0 {
    var addresses = Array(arguments[3...])
    var every = Duration.zero
    if addresses.count >= 3, addresses[0] == "--every", let seconds = Double(addresses[1]) {
        every = .milliseconds(Int64(seconds * 1_000))
        addresses.removeFirst(2)
    }
    try await linkTimes(polls: polls, every: every, addresses: addresses)
    exit(0)
}

/// CLOCK_MONOTONIC in nanoseconds.
func monotonicNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

/// `--link`: one poll at a time, each one's instants and the transport's own link time.
func linkTimes(polls: Int, every: Duration, addresses: [String]) async throws {
    let quiet = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
    let counter = try BluetoothUUID("4b410002-6b65-6570-616c-697665000000")
    let connection = try await DBusConnection(bus: .system)
    let transport = BlueZTransport(connection: connection, logger: quiet)
    let cacheTask = Task { try await transport.run() }
    try await transport.waitUntilReady(timeout: .seconds(30))
    let peripherals = addresses.map { Peripheral(address: $0, adapter: "hci0") }
    var failures = 0
    let start = ContinuousClock.now
    for index in 0..<(peripherals.count + polls) {
        // Paced like the daemon's ticks when asked: bluetoothd 5.66 loses a Connect sent while the last link's
        // ATT channel is still being torn down, though Connected=false has been signalled (the qemu lab).
        try await Task.sleep(until: start + every * index)
        let peripheral = peripherals[index % peripherals.count]
        let connectCall = monotonicNanoseconds()
        do {
            try await transport.connect(
                peripheral, options: ConnectOptions(timeout: .seconds(10), characteristics: [counter]))
            _ = try await transport.read(counter, from: peripheral)
        } catch {
            failures += 1
            print("failed address=\(peripheral.address) error=\(error)")
            await transport.disconnect(peripheral, timeout: .seconds(10))
            continue
        }
        let readDone = monotonicNanoseconds()
        let disconnectCall = monotonicNanoseconds()
        await transport.disconnect(peripheral, timeout: .seconds(10))
        let returned = monotonicNanoseconds()
        let reported = transport.linkTime(of: peripheral).map {
            $0.components.seconds * 1_000_000_000 + $0.components.attoseconds / 1_000_000_000
        }
        print(
            """
            poll address=\(peripheral.address) warmup=\(index < peripherals.count ? 1 : 0) \
            connect_ns=\(connectCall) read_ns=\(readDone) disconnect_ns=\(disconnectCall) returned_ns=\(returned) \
            reported_ns=\(reported ?? -1) ok=1
            """
        )
    }
    print("done polls=\(polls) failures=\(failures)")
    cacheTask.cancel()
    _ = await cacheTask.result
    await connection.close()
}

guard arguments.count >= 2, let count = Int(arguments[1]), count > 0 else {
    print("usage: BlueZBenchmark N [ROUNDS] | --link POLLS ADDRESS… | --sync [REPEATS]")
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
