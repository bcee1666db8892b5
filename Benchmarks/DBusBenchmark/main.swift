// DBusBenchmark: median round trip and client CPU per method call, Swift `DBus` against a C libdbus client.
//
//   swift build -c release --product DBusBenchmark && .build/release/DBusBenchmark [N]
//
// Starts a private dbus-daemon and a server (this program with `serve`, exporting /bench), then runs N Ping
// calls from this process through `DBusConnection.call` and N from `Benchmarks/c-floor/dbus_ping.c` (compiled
// with cc on the fly), and prints both side by side. CPU is getrusage(RUSAGE_SELF) of the client process.

import DBus
import Foundation

#if canImport(Glibc)
import Glibc
#endif

let benchName = "org.example.Bench"
let benchPath: ObjectPath = "/bench"

func spawn(_ arguments: [String]) throws -> (pid: pid_t, stdout: Int32) {
    var pipeEnds: [Int32] = [0, 0]
    guard pipe(&pipeEnds) == 0 else { throw BenchmarkError("pipe failed") }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
    posix_spawn_file_actions_addclose(&actions, pipeEnds[0])
    posix_spawn_file_actions_addclose(&actions, pipeEnds[1])
    let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid: pid_t = 0
    let result = posix_spawnp(&pid, arguments[0], &actions, nil, argv, environ)
    close(pipeEnds[1])
    guard result == 0 else { throw BenchmarkError("cannot start \(arguments[0]): \(result)") }
    return (pid, pipeEnds[0])
}

/// Reads lines from `fd` until `count` lines or end of file.
func readLines(_ fd: Int32, count: Int) -> [String] {
    var text = ""
    var byte: UInt8 = 0
    while text.filter({ $0 == "\n" }).count < count, read(fd, &byte, 1) == 1 {
        text.unicodeScalars.append(Unicode.Scalar(byte))
    }
    return text.split(separator: "\n").map(String.init)
}

func runToEnd(_ arguments: [String]) throws -> String {
    let (pid, stdout) = try spawn(arguments)
    defer { close(stdout) }
    let lines = readLines(stdout, count: .max)
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    guard status == 0 else { throw BenchmarkError("\(arguments[0]) failed with status \(status)") }
    return lines.joined(separator: "\n")
}

struct BenchmarkError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func cpuMicroseconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
}

func serve(address: String) async throws {
    let connection = try await DBusConnection(bus: .address(address))
    let object = DBusObject(interfaces: [
        DBusInterface(benchName, methods: [
            DBusMethod("Ping") { _ in [] },
            DBusMethod("Echo", in: nil, out: nil) { call in call.arguments },
        ])
    ])
    try await connection.export(object, at: benchPath)
    guard try await connection.requestName(benchName) == .primaryOwner else { throw BenchmarkError("name taken") }
    print("ready")
    fflush(nil)  // all streams: `stdout` itself is a global var Swift 6 will not touch
    while true { try await Task.sleep(for: .seconds(3600)) }
}

func startDaemon(directory: String) throws -> (address: String, pid: pid_t) {
    let config = """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>system</type>
          <listen>unix:path=\(directory)/bus.sock</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow user="*"/> <allow own="*"/> <allow send_destination="*"/> <allow receive_sender="*"/>
          </policy>
        </busconfig>
        """
    try config.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
    let (pid, stdout) = try spawn([
        "dbus-daemon", "--config-file=\(directory)/bus.conf", "--print-address=1", "--print-pid=1", "--fork",
        "--nopidfile",
    ])
    defer { close(stdout) }
    let lines = readLines(stdout, count: 2)
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    guard lines.count == 2, let daemon = pid_t(lines[1]) else { throw BenchmarkError("dbus-daemon: \(lines)") }
    return (lines[0], daemon)
}

/// The calls from a task on the global executor: one hop to the connection's thread and one back per call.
@concurrent func swiftClient(address: String, calls: Int) async throws -> (median: Double, cpu: Double) {
    let client = try await DBusConnection(bus: .address(address))
    let result = try await measure(calls: calls) {
        _ = try await client.call(destination: benchName, path: benchPath, interface: benchName, method: "Ping")
    }
    await client.close()
    return result
}

/// The calls from a task that prefers the connection's thread (`withTaskExecutorPreference`): no hop at all.
@concurrent func preferringSwiftClient(address: String, calls: Int) async throws -> (median: Double, cpu: Double) {
    let client = try await DBusConnection(bus: .address(address))
    let result = try await withTaskExecutorPreference(client.taskExecutor) {
        try await measure(calls: calls) {
            _ = try await client.call(destination: benchName, path: benchPath, interface: benchName, method: "Ping")
        }
    }
    await client.close()
    return result
}

/// The calls from code isolated to the connection: everything stays on its queue.
func isolatedSwiftClient(address: String, calls: Int) async throws -> (median: Double, cpu: Double) {
    let client = try await DBusConnection(bus: .address(address))
    func loop(_ client: isolated DBusConnection) async throws -> (median: Double, cpu: Double) {
        try await measure(calls: calls) {
            _ = try await client.call(destination: benchName, path: benchPath, interface: benchName, method: "Ping")
        }
    }
    let result = try await loop(client)
    await client.close()
    return result
}

nonisolated(nonsending) func measure(calls: Int, _ body: nonisolated(nonsending) () async throws -> Void) async throws
    -> (median: Double, cpu: Double)
{
    for _ in 0..<1000 { try await body() }
    var latencies = [Double](repeating: 0, count: calls)
    let clock = ContinuousClock()
    let cpuBefore = cpuMicroseconds()
    for index in 0..<calls {
        let start = clock.now
        try await body()
        let elapsed = (clock.now - start).components
        latencies[index] = Double(elapsed.seconds) * 1e6 + Double(elapsed.attoseconds) / 1e12
    }
    let cpu = (cpuMicroseconds() - cpuBefore) / Double(calls)
    latencies.sort()
    return (latencies[calls / 2], cpu)
}

let arguments = CommandLine.arguments
if arguments.count >= 3, arguments[1] == "serve" {
    try await serve(address: arguments[2])
    exit(0)
}

let calls = arguments.count >= 2 ? Int(arguments[1]) ?? 20_000 : 20_000
var template = Array("/tmp/dbus-benchmark-XXXXXX".utf8CString)
guard let made = mkdtemp(&template) else { throw BenchmarkError("mkdtemp failed") }
let directory = String(cString: made)
let (address, daemon) = try startDaemon(directory: directory)
defer {
    kill(daemon, SIGKILL)
    try? FileManager.default.removeItem(atPath: directory)
}
let server = try spawn([arguments[0], "serve", address])
guard readLines(server.stdout, count: 1) == ["ready"] else { throw BenchmarkError("the server did not start") }

let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path
let cBinary = directory + "/dbus_ping"
_ = try runToEnd([
    "/bin/sh", "-c",
    "cc -O2 -o '\(cBinary)' '\(packageRoot)/Benchmarks/c-floor/dbus_ping.c' $(pkg-config --cflags --libs dbus-1)",
])

print("\(calls) Ping calls per client, median of each round trip; client CPU = getrusage(RUSAGE_SELF) / calls")
// DBUS_BENCHMARK_ONLY=pool|isolated|preferring runs one Swift client alone (for profiling).
let only = ProcessInfo.processInfo.environment["DBUS_BENCHMARK_ONLY"]
let swift = only == "isolated" || only == "preferring" ? (median: Double.nan, cpu: Double.nan) : try await swiftClient(address: address, calls: calls)
let isolated = only == "pool" || only == "preferring" ? (median: Double.nan, cpu: Double.nan) : try await isolatedSwiftClient(address: address, calls: calls)
let preferring = only == "pool" || only == "isolated" ? (median: Double.nan, cpu: Double.nan) : try await preferringSwiftClient(address: address, calls: calls)
let cOutput = try runToEnd([cBinary, address, String(calls)])
let cValues = Dictionary(uniqueKeysWithValues: cOutput.split(separator: " ").compactMap { pair -> (String, Double)? in
    let parts = pair.split(separator: "=")
    guard parts.count == 2, let value = Double(parts[1]) else { return nil }
    return (String(parts[0]), value)
})
// dbus-fast (what bleak speaks), when a venv with it exists: DBUS_FAST_PYTHON, or the fidelity check's venv.
let python = ProcessInfo.processInfo.environment["DBUS_FAST_PYTHON"]
    ?? (NSHomeDirectory() + "/.cache/keepalive-venv/bin/python")
var fastValues: [String: Double] = [:]
if FileManager.default.isExecutableFile(atPath: python) {
    let output = (try? runToEnd([python, "\(packageRoot)/Benchmarks/c-floor/dbus_fast_ping.py", address, String(calls)])) ?? ""
    fastValues = Dictionary(uniqueKeysWithValues: output.split(separator: " ").compactMap { pair -> (String, Double)? in
        let parts = pair.split(separator: "=")
        guard parts.count == 2, let value = Double(parts[1].trimmingCharacters(in: .whitespacesAndNewlines)) else { return nil }
        return (String(parts[0]), value)
    })
}
let cMedian = cValues["median_us"] ?? .nan
let cCPU = cValues["cpu_us_per_call"] ?? .nan
print("client                         median round trip   client CPU per call   CPU vs C")
print(String(format: "Swift DBus, caller on the pool   %8.1f µs         %8.2f µs          %5.2f×",
             swift.median, swift.cpu, swift.cpu / cCPU))
print(String(format: "Swift DBus, caller isolated      %8.1f µs         %8.2f µs          %5.2f×",
             isolated.median, isolated.cpu, isolated.cpu / cCPU))
print(String(format: "Swift DBus, caller on its thread  %8.1f µs         %8.2f µs          %5.2f×",
             preferring.median, preferring.cpu, preferring.cpu / cCPU))
print(String(format: "C libdbus, blocking call         %8.1f µs         %8.2f µs          %5.2f×", cMedian, cCPU, 1.0))
if let fastMedian = fastValues["median_us"], let fastCPU = fastValues["cpu_us_per_call"] {
    print(String(format: "python dbus-fast (asyncio)       %8.1f µs         %8.2f µs          %5.2f×", fastMedian, fastCPU, fastCPU / cCPU))
} else {
    print("python dbus-fast: skipped (no venv with dbus-fast at \(python); `make fidelity` creates it)")
}
kill(server.pid, SIGKILL)
var serverStatus: Int32 = 0
waitpid(server.pid, &serverStatus, 0)
