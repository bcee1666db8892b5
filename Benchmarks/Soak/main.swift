// keepalive-soak: the daemon for a long run against the simulator with seeded random faults, checking that
// nothing leaks and nothing is lost (issue #9).
//
//   keepalive-soak [--minutes M] [--devices N] [--fault-rate P] [--seed S]
//
// `keepalive run` (the binary next to this one) polls N sensors every second on a private bus. Each second,
// each sensor gets a fault with probability P (connect abort, InProgress, read hang, ATT error, absent),
// cleared 1-5 s later. Adapter-level faults come on top, for the healing ladder (issue #15): the adapter wedged
// (every connect aborts until it is powered off) at 1/6 of the run, powered off behind the daemon's back
// (`adapter_power: on`) at 5/6; in runs of an hour or more, one of them every 30 minutes, alternating, which stays
// inside the ladder's 3 power changes per hour. The daemon's RSS is sampled every minute (every 10 s for runs
// under 5 minutes). At the end: SIGTERM, then the checks — exit 0, `seq` contiguous, one record per device per
// tick, no window force-ended or left open, no link up, RSS drift after warm-up ≤ 1 MiB, every adapter fault
// healed (the adapter powered and not wedged, the log saying so), at most 3 power changes in any hour. Exit 1
// when a check fails.
import BlueZSimulator
import DBus
import LocalServices
import TestHarness
import Foundation
import KeepAliveTesting

#if canImport(Glibc)
    import Glibc
#endif

func option(_ name: String, _ fallback: Double) -> Double {
    guard let index = CommandLine.arguments.firstIndex(of: name), index + 1 < CommandLine.arguments.count,
        let value = Double(CommandLine.arguments[index + 1])
    else { return fallback }
    return value
}

let minutes = option("--minutes", 2)
let deviceCount = Int(option("--devices", 50))
let faultRate = option("--fault-rate", 0.05)
var random = SeededRandomNumberGenerator(seed: UInt64(option("--seed", 1)))

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keepalive-soak-\(getpid())").path
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
let configPath = directory + "/keepalive.yaml"
let outputPath = directory + "/records.jsonl"
// 50 polls a second at ~250 ms each need more than BlueZ's usual handful of links: 16 (the most allowed).
// The ladder climbs quicker than by default (2 failing rounds, 10 s cooldown), so that the 2-minute run sees it
// through: a wedged adapter's devices back off to one poll in 16 s, which makes rounds long.
var yaml =
    """
        interval: 1s\nmin_interval: 1s\nmax_connections: 16\nlow_power: {mode: off}\nadapter_power: on\n\
        healing: {failing_rounds: 2, cooldown: 10s}\ndevices:\n
        """
for number in 1...deviceCount {
    let address = String(format: "C0:FF:EE:00:%02X:%02X", (number >> 8) & 0xFF, number & 0xFF)
    yaml +=
        "  - {name: sensor-\(number), address: \"\(address)\", read: [2a19, 4b410002-6b65-6570-616c-697665000000]}\n"
}
try yaml.write(toFile: configPath, atomically: true, encoding: .utf8)

let bus = try PrivateBus.start()
var simulatorConfiguration = BlueZSimulator.Configuration(adapters: ["hci0"], devices: .sensors(count: deviceCount))
simulatorConfiguration.latencies.disconnect = .milliseconds(100)
simulatorConfiguration.latencies.connectAbort = .milliseconds(300)
simulatorConfiguration.latencies.attTimeout = .milliseconds(400)
let simulator = try await BlueZSimulator.start(on: .address(bus.address), configuration: simulatorConfiguration)

let binary =
    URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().path
    + "/keepalive"
let (pid, stdout, stderr) = try Subprocess.spawn([
    binary, "run", "--config", configPath, "--bus", bus.address, "--output", outputPath,
])
let logs = LockedText()
Thread { _ = Subprocess.readAll(stdout) }.start()
Thread { logs.set(Subprocess.readAll(stderr)) }.start()

final class LockedText: @unchecked Sendable {
    // @unchecked Sendable: guarded by `lock`.
    private let lock = NSLock()
    private var text = ""
    func set(_ value: String) { lock.withLock { text = value } }
    var value: String { lock.withLock { text } }
}

let faults: [(BlueZSimulator.Fault, String)] = [
    (.connectAbort(count: 2), "connect-abort"), (.inProgress, "in-progress"), (.readHang, "read-hang"),
    (.attError(0x0e), "att-error"), (.absent, "absent"),
]
let clock = ContinuousClock()
let start = clock.now
let end = start + .seconds(minutes * 60)
let sampleEvery: Duration = minutes < 5 ? .seconds(10) : .seconds(60)
var nextSample = start + sampleEvery
var samples: [(seconds: Int, kilobytes: Int)] = [(0, residentSetKilobytes(of: pid))]
var pending: [(until: ContinuousClock.Instant, name: String, address: String)] = []
var injected = 0
/// When each adapter-level fault comes: two in a short run, then one every 30 minutes, alternating.
enum AdapterFault: String { case wedge, powerOff = "power-off" }
var adapterFaults: [(at: Duration, fault: AdapterFault)] = [
    (.seconds(minutes * 10), .wedge), (.seconds(minutes * 50), .powerOff),
]
if minutes >= 60 {
    adapterFaults = stride(from: 10, to: Int(minutes), by: 30).enumerated().map { index, minute in
        (.seconds(minute * 60), index % 2 == 0 ? .wedge : .powerOff)
    }
}
var adapterInjected: [(at: Duration, fault: AdapterFault)] = []
print(
    """
        soak: \(deviceCount) devices, 1 s interval, \(minutes) min, fault rate \(faultRate) per device-second, \
        adapter faults \(adapterFaults.map { "\($0.fault.rawValue) at \($0.at.components.seconds) s" })
        """
)
while clock.now < end {
    try await Task.sleep(for: .seconds(1))
    let now = clock.now
    if let next = adapterFaults.first, now - start >= next.at {
        adapterFaults.removeFirst()
        switch next.fault {
        case .wedge: try simulator.wedge()
        case .powerOff: try await simulator.setPowered(false)
        }
        adapterInjected.append((now - start, next.fault))
        print("  t=\((now - start).components.seconds) s  adapter fault: \(next.fault.rawValue)")
    }
    for fault in pending where fault.until <= now {
        try? simulator.clearFault(fault.name, device: fault.address)
    }
    pending.removeAll { $0.until <= now }
    for number in 1...deviceCount where Double.random(in: 0..<1, using: &random) < faultRate {
        let address = String(format: "C0:FF:EE:00:%02X:%02X", (number >> 8) & 0xFF, number & 0xFF)
        guard !pending.contains(where: { $0.address == address }) else { continue }
        let (fault, name) = faults[Int(random.next() % UInt64(faults.count))]
        try? await simulator.inject(fault, device: address)
        pending.append((now + .seconds(1 + Int(random.next() % 5)), name, address))
        injected += 1
    }
    if now >= nextSample {
        let seconds = Int((now - start).components.seconds)
        samples.append((seconds, residentSetKilobytes(of: pid)))
        print("  t=\(seconds) s  rss \(samples.last!.kilobytes) KiB  faults injected \(injected)")
        nextSample = now + sampleEvery
    }
}
simulator.clearAllFaults()
kill(pid, SIGTERM)
let status = Subprocess.waitForExit(pid)
try await Task.sleep(for: .milliseconds(200))

// The checks.
var failures: [String] = []
if status != 0 { failures.append("exit status \(status)") }
let lines = (try? String(contentsOfFile: outputPath, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
func field(_ line: String, _ name: String) -> String? {
    guard let range = line.range(of: "\"\(name)\":") else { return nil }
    let rest = line[range.upperBound...]
    return rest.first == "\""
        ? String(rest.dropFirst().prefix { $0 != "\"" }) : String(rest.prefix { $0 != "," && $0 != "}" })
}
let sequence = lines.compactMap { field($0, "seq").flatMap(Int.init) }
if sequence != Array(0..<lines.count) { failures.append("seq is not contiguous 0..<\(lines.count)") }
var ticks: [String: [Int]] = [:]
for line in lines {
    if let device = field(line, "device"), let tick = field(line, "tick").flatMap(Int.init) {
        ticks[device, default: []].append(tick)
    }
}
let badDevices = ticks.filter { $0.value.sorted() != Array(0..<$0.value.count) }.keys.sorted()
if !badDevices.isEmpty { failures.append("ticks missing or repeated for \(badDevices.prefix(5))") }
if ticks.count != deviceCount { failures.append("records for \(ticks.count) of \(deviceCount) devices") }
let forced = lines.filter { $0.contains("\"outcome\":\"forcedEnd\"") }.count
if forced > 0 { failures.append("\(forced) windows force-ended") }
let log = logs.value
if !log.contains("openWindows=0") { failures.append("windows left open (or no final log line)") }
try await Task.sleep(for: .seconds(1))  // BlueZ drops the link just after answering Disconnect
if !simulator.connectedDevices.isEmpty { failures.append("links left up: \(simulator.connectedDevices)") }
// Every adapter fault healed by the ladder, within its hourly bound.
if simulator.isWedged() { failures.append("the adapter is still wedged at the end") }
if !simulator.isPowered() { failures.append("the adapter is still powered off at the end") }
let powerChanges = simulator.powerOns()
let hours = max(1, Int((minutes + 59) / 60))
if powerChanges > 3 * hours { failures.append("\(powerChanges) power changes in \(minutes) min (at most 3 per hour)") }
for (at, fault) in adapterInjected {
    let healed = fault == .wedge ? "healing: power-cycling the adapter" : "healing: powering the adapter on"
    if !log.contains(healed) {
        failures.append(
            "the \(fault.rawValue) at \(at.components.seconds) s was not healed (no `\(healed)` in the log)")
    }
}
if !adapterInjected.isEmpty && !log.contains("adapter healthy again") {
    failures.append("no `adapter healthy again` in the log")
}
let failed = lines.filter { $0.contains("\"result\":\"failed\"") }.count
let warm = samples.dropFirst(min(2, samples.count - 1))
let drift = (warm.last?.kilobytes ?? 0) - (warm.first?.kilobytes ?? 0)
if drift > 1_024 { failures.append("RSS grew \(drift) KiB after warm-up (limit 1024)") }
print(
    """
        soak: \(lines.count) records (\(failed) failed, typed), \(injected) faults, \(adapterInjected.count) adapter \
        faults healed with \(powerChanges) power changes, \(forced) forced ends, RSS \
        \(samples.map { "\($0.kilobytes)" }.joined(separator: " ")) KiB, drift after warm-up \(drift) KiB
        """
)
await simulator.stop()
bus.stop()
try? FileManager.default.removeItem(atPath: directory)
if failures.isEmpty {
    print("soak: PASS")
} else {
    print("soak: FAIL — " + failures.joined(separator: "; "))
    print(log.split(separator: "\n").suffix(20).joined(separator: "\n"))
    exit(1)
}
