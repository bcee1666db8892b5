// DBusBenchmark: median round trip and client CPU per method call, Swift `DBus` against a C libdbus client.
//
//   swift build -c release --product DBusBenchmark && .build/release/DBusBenchmark [N]
//
// Starts a private dbus-daemon and a server (this program with `serve`, exporting /bench), then runs N Ping
// calls from this process through `DBusConnection.call` and N from `Benchmarks/c-floor/dbus_ping.c` (compiled
// with cc on the fly), and prints both side by side. CPU is getrusage(RUSAGE_SELF) of the client process.
//
//   DBusBenchmark serve ADDRESS                            the server alone
//   DBusBenchmark client ADDRESS N pool|isolated|preferring  one Swift client alone

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

/// CLOCK_MONOTONIC in microseconds, read as the C client reads it (bench_clock.h): `ContinuousClock` arithmetic
/// (128-bit `Duration`s) would add its own cost to every call measured.
func monotonicMicroseconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) * 1e6 + Double(time.tv_nsec) / 1e3
}

/// This process's user and system CPU, in microseconds.
func cpuMicroseconds() -> (user: Double, system: Double) {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return (
        Double(usage.ru_utime.tv_sec) * 1e6 + Double(usage.ru_utime.tv_usec),
        Double(usage.ru_stime.tv_sec) * 1e6 + Double(usage.ru_stime.tv_usec)
    )
}

/// One client's result: the median round trip and CPU per call (user + system, and apart), in microseconds.
struct Measurement {
    var median, user, system: Double
    var cpu: Double { user + system }
    static let skipped = Measurement(median: .nan, user: .nan, system: .nan)
}

func serve(address: String) async throws {
    let connection = try await DBusConnection(bus: .address(address))
    let object = DBusObject(interfaces: [
        DBusInterface(
            benchName,
            methods: [
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
@concurrent func swiftClient(address: String, calls: Int) async throws -> Measurement {
    let client = try await DBusConnection(bus: .address(address))
    let result = try await measure(calls: calls) {
        _ = try await client.call(destination: benchName, path: benchPath, interface: benchName, method: "Ping")
    }
    await client.close()
    return result
}

/// The calls from a task that prefers the connection's thread (`withTaskExecutorPreference`): no hop at all.
@concurrent func preferringSwiftClient(address: String, calls: Int) async throws -> Measurement {
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
func isolatedSwiftClient(address: String, calls: Int) async throws -> Measurement {
    let client = try await DBusConnection(bus: .address(address))
    func loop(_ client: isolated DBusConnection) async throws -> Measurement {
        try await measure(calls: calls) {
            _ = try await client.call(destination: benchName, path: benchPath, interface: benchName, method: "Ping")
        }
    }
    let result = try await loop(client)
    await client.close()
    return result
}

nonisolated(nonsending) func measure(calls: Int, _ body: nonisolated(nonsending) () async throws -> Void) async throws
    -> Measurement
{
    for _ in 0..<1000 { try await body() }
    var latencies = [Double](repeating: 0, count: calls)
    let cpuBefore = cpuMicroseconds()
    for index in 0..<calls {
        let start = monotonicMicroseconds()
        try await body()
        latencies[index] = monotonicMicroseconds() - start
    }
    let cpuAfter = cpuMicroseconds()
    latencies.sort()
    return Measurement(
        median: latencies[calls / 2], user: (cpuAfter.user - cpuBefore.user) / Double(calls),
        system: (cpuAfter.system - cpuBefore.system) / Double(calls))
}

let arguments = CommandLine.arguments
if arguments.count >= 3, arguments[1] == "serve" {
    try await serve(address: arguments[2])
    exit(0)
}
// `client ADDRESS N pool|isolated|preferring`: one Swift client alone against a running `serve`, for strace or
// perf without the daemon, the server and the other clients in the same process tree.
if arguments.count >= 5, arguments[1] == "client", let calls = Int(arguments[3]) {
    let clients = ["pool": swiftClient, "isolated": isolatedSwiftClient, "preferring": preferringSwiftClient]
    guard let client = clients[arguments[4]] else { throw BenchmarkError("no client \(arguments[4])") }
    let m = try await client(arguments[2], calls)
    print(
        String(
            format: "median_us=%.1f cpu_us_per_call=%.2f user_us_per_call=%.2f system_us_per_call=%.2f",
            m.median, m.cpu, m.user, m.system))
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

// Rounds: every client once per round, and each client's CPU compared with the C client's of the same round, so
// that a machine whose speed drifts (a shared VM) moves both sides of each ratio together. DBUS_BENCHMARK_ROUNDS
// sets how many (default 5).
let environment = ProcessInfo.processInfo.environment
let rounds = max(1, environment["DBUS_BENCHMARK_ROUNDS"].flatMap { Int($0) } ?? 5)
print(
    """
        \(calls) Ping calls per client and round, \(rounds) rounds; median round trip; client CPU = \
        getrusage(RUSAGE_SELF) / calls
        """
)

func keyValues(_ output: String) -> [String: Double] {
    Dictionary(
        output.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { pair -> (String, Double)? in
            let parts = pair.split(separator: "=")
            guard parts.count == 2, let value = Double(parts[1]) else { return nil }
            return (String(parts[0]), value)
        }, uniquingKeysWith: { $1 })
}
func measurement(_ values: [String: Double]) -> Measurement? {
    guard let median = values["median_us"], let cpu = values["cpu_us_per_call"] else { return nil }
    guard let user = values["user_us_per_call"], let system = values["system_us_per_call"] else {
        return Measurement(median: median, user: cpu, system: 0)
    }
    return Measurement(median: median, user: user, system: system)
}

// DBUS_BENCHMARK_ONLY=pool|isolated|preferring runs one Swift client alone (for profiling).
let only = environment["DBUS_BENCHMARK_ONLY"]
// dbus-fast (what bleak speaks), when a venv with it exists: DBUS_FAST_PYTHON, or the fidelity check's venv.
let python = environment["DBUS_FAST_PYTHON"] ?? (NSHomeDirectory() + "/.cache/keepalive-venv/bin/python")
let hasFast = FileManager.default.isExecutableFile(atPath: python)
let names = [
    "Swift DBus, caller on the pool", "Swift DBus, caller isolated", "Swift DBus, caller on its thread",
    "C libdbus, blocking call", "python dbus-fast (asyncio)",
]
var results = [[Measurement]](repeating: [], count: names.count)
for _ in 0..<rounds {
    let c = measurement(keyValues(try runToEnd([cBinary, address, String(calls)])))
    guard let c else { throw BenchmarkError("the C client printed no result") }
    results[3].append(c)
    if only == nil || only == "pool" { results[0].append(try await swiftClient(address: address, calls: calls)) }
    if only == nil || only == "isolated" {
        results[1].append(try await isolatedSwiftClient(address: address, calls: calls))
    }
    if only == nil || only == "preferring" {
        results[2].append(try await preferringSwiftClient(address: address, calls: calls))
    }
    if hasFast,
        let output = try? runToEnd([
            python, "\(packageRoot)/Benchmarks/c-floor/dbus_fast_ping.py", address, String(calls),
        ]),
        let fast = measurement(keyValues(output))
    {
        results[4].append(fast)
    }
}

func median(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    return sorted.count % 2 == 1
        ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}
print("client                            median round trip   CPU per call (user + system)     CPU vs C (min–max)")
for (index, name) in names.enumerated() {
    let runs = results[index]
    guard !runs.isEmpty else {
        if index == 4, !hasFast {
            print("python dbus-fast: skipped (no venv with dbus-fast at \(python); `make fidelity` creates it)")
        }
        continue
    }
    // The ratio of each round with the C client of the same round.
    let ratios = zip(runs, results[3]).map { $0.cpu / $1.cpu }
    let padded = name.padding(toLength: 33, withPad: " ", startingAt: 0)
    print(
        padded
            + String(
                format: "%8.1f µs       %8.2f µs (%5.2f + %5.2f)   %5.2f×  (%.2f–%.2f)", median(runs.map(\.median)),
                median(runs.map(\.cpu)), median(runs.map(\.user)), median(runs.map(\.system)), median(ratios),
                ratios.min() ?? .nan, ratios.max() ?? .nan))
}
kill(server.pid, SIGKILL)
var serverStatus: Int32 = 0
waitpid(server.pid, &serverStatus, 0)
