// MQTTBenchmark: the MQTT bridge as the daemon ships it, publishing the records of many devices (issue #11).
//
//   swift build -c release --product MQTTBenchmark
//   .build/release/MQTTBenchmark --port P [--devices 1000] [--tick-ms 10000] [--ticks 3] [--bursts 2]
//                                [--spool DIR] [--sync every|never|N] [--run swift]
//
// The bridge (`MQTTBridge`, spool on disk with the daemon's default sync policy, QoS 1, MQTT 5, discovery off)
// connects to the broker on 127.0.0.1:P; one generator thread plays the poll engine and calls `submit` as the
// daemon's record sink does, with JSON lines shaped like the daemon's (≈ 520 bytes, three readings). Phases:
//
//   harness  one spread tick and one burst into a sink that does nothing: the generator's own CPU per record,
//            subtracted from the measured phases below
//   warmup   one spread tick through the bridge (the first records publish availability and failures)
//   spread   K ticks: record k of a tick ends its poll at tick start + k × tick / N, as polls spread over a tick
//   burst    B bursts: N records whose polls all ended at the same instant, back to back
//
// Every record carries `"bench":{"run":…,"phase":…,"poll_end_ns":…}`, its poll's end on CLOCK_REALTIME (the
// scheduled instant, so time a record waits behind the one before counts), for an independent subscriber
// (mosquitto_sub -F '%U %p') to measure poll end → receipt. CPU is the whole process's
// (CLOCK_PROCESS_CPUTIME_ID: every thread, the bridge's and libmosquitto's included) from a phase's first
// record until the broker acknowledged its last. Prints one `phase=… key=value …` line per phase.
// Benchmarks/mqtt_peer.py is the same program over paho-mqtt; Benchmarks/run.py (section mqtt) runs both.

import Foundation
import Logging
import MQTT
import MQTTBridge
import Readings

#if canImport(Glibc)
    import Glibc
#endif

private struct Options {
    var port = 1883
    var devices = 1_000
    var tickMilliseconds = 10_000
    var ticks = 3
    var bursts = 2
    var spool = ""
    var sync = BridgeConfiguration.SyncPolicy.everyRecord
    var run = "swift"

    init(_ arguments: [String]) {
        var index = 0
        func value() -> String {
            index += 1
            guard index < arguments.count else { fail("\(arguments[index - 1]) needs a value") }
            return arguments[index]
        }
        while index < arguments.count {
            switch arguments[index] {
            case "--port": port = Int(value()) ?? port
            case "--devices": devices = Int(value()) ?? devices
            case "--tick-ms": tickMilliseconds = Int(value()) ?? tickMilliseconds
            case "--ticks": ticks = Int(value()) ?? ticks
            case "--bursts": bursts = Int(value()) ?? bursts
            case "--spool": spool = value()
            case "--run": run = value()
            case "--sync":
                let text = value()
                switch text {
                case "every": sync = .everyRecord
                case "never": sync = .never
                default:
                    guard let count = Int(text), count > 0 else { fail("--sync every|never|N") }
                    sync = .everyRecords(count)
                }
            default: fail("unknown argument \(arguments[index])")
            }
            index += 1
        }
    }
}

private func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("MQTTBenchmark: \(message)\n".utf8))
    exit(1)
}

private func nanoseconds(_ clock: clockid_t) -> Int64 {
    var now = timespec()
    clock_gettime(clock, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

private func sleep(untilMonotonic deadline: Int64) {
    var target = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &target, nil) == EINTR {}
}

private func percentile(_ sorted: [Int64], _ fraction: Double) -> Int64 {
    guard !sorted.isEmpty else { return 0 }
    let index = Int((fraction * Double(sorted.count - 1)).rounded())
    return sorted[min(max(index, 0), sorted.count - 1)]
}

/// A record's JSON line as the daemon writes it (README "Output: JSON Lines"), plus the benchmark's field.
/// mqtt_peer.py builds the same bytes.
private func recordLine(
    device: Int, sequence: UInt64, tick: Int, timestamp: String, run: String, phase: String, pollEnd: Int64
) -> [UInt8] {
    let battery = 40 + (device + tick) % 60
    let temperature = 180 + (device * 7 + tick) % 100
    let humidity = 300 + (device * 13 + tick) % 400
    let address = "C0:FF:EE:00:\(hexByte(device >> 8)):\(hexByte(device & 0xFF))"
    let line =
        "{\"ts\":\"\(timestamp)\",\"seq\":\(sequence),\"device\":\"d\(device)\",\"address\":\"\(address)\","
        + "\"adapter\":\"hci0\",\"tick\":\(tick),\"result\":\"newData\",\"trigger\":\"schedule\","
        + "\"values\":{\"2a19\":\"\(hexByte(battery))\",\"2a6e\":\"\(hexByte(temperature & 0xFF))"
        + "\(hexByte(temperature >> 8))\",\"2a6f\":\"\(hexByte(humidity & 0xFF))\(hexByte(humidity >> 8))\"},"
        + "\"notifications\":[],\"readings\":{\"battery\":{\"value\":\(battery),\"unit\":\"%\"},"
        + "\"temperature\":{\"value\":\(temperature / 10).\(temperature % 10),\"unit\":\"°C\"},"
        + "\"humidity\":{\"value\":\(humidity / 10).\(humidity % 10),\"unit\":\"%\"}},\"error\":null,"
        + "\"window\":{\"id\":\(tick + 1),\"budget_ms\":20000,\"used_ms\":\(1_800 + device % 700),"
        + "\"outcome\":\"completed\"},\"attempts\":1,\"interval_ms\":30000,\"power\":\"normal\","
        + "\"bench\":{\"run\":\"\(run)\",\"phase\":\"\(phase)\",\"poll_end_ns\":\(pollEnd)}}"
    return Array(line.utf8)
}

private func hexByte(_ value: Int) -> String {
    let digits: [Character] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "a", "b", "c", "d", "e", "f"]
    return String([digits[(value >> 4) & 0xF], digits[value & 0xF]])
}

private func readings(device: Int, tick: Int) -> [Reading] {
    let temperature = 180 + (device * 7 + tick) % 100
    let humidity = 300 + (device * 13 + tick) % 400
    return [
        Reading(name: "battery", value: .unsigned(UInt64(40 + (device + tick) % 60)), unit: "%"),
        Reading(name: "temperature", value: .number(Double(temperature) / 10), unit: "°C"),
        Reading(name: "humidity", value: .number(Double(humidity) / 10), unit: "%"),
    ]
}

private func timestampText(realtime: Int64) -> String {
    var seconds = time_t(realtime / 1_000_000_000)
    var parts = tm()
    gmtime_r(&seconds, &parts)
    func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
    let milliseconds = Int(realtime / 1_000_000 % 1_000)
    let fraction = String(repeating: "0", count: 3 - String(milliseconds).count) + String(milliseconds)
    return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):"
        + "\(two(parts.tm_min)):\(two(parts.tm_sec)).\(fraction)Z"
}

/// One `submit` as the daemon's record sink makes it; nil: the harness (nothing at all).
private typealias Sink = (_ device: Int, _ sequence: UInt64, _ readings: [Reading], _ payload: [UInt8]) throws -> Void

private struct PhaseResult {
    var name: String
    var records: Int
    var cpuNanoseconds: Int64
    var userMicroseconds: Int64
    var systemMicroseconds: Int64
    var wallNanoseconds: Int64
    var drainNanoseconds: Int64
    var submits: [Int64]
    var lateness: [Int64]
}

private func rusageMicroseconds() -> (user: Int64, system: Int64) {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return (
        Int64(usage.ru_utime.tv_sec) * 1_000_000 + Int64(usage.ru_utime.tv_usec),
        Int64(usage.ru_stime.tv_sec) * 1_000_000 + Int64(usage.ru_stime.tv_usec)
    )
}

private final class Generator: Sendable {
    let options: Options
    let bridge: MQTTBridge

    init(options: Options, bridge: MQTTBridge) {
        self.options = options
        self.bridge = bridge
    }

    /// Runs `ticks` ticks (spread) or bursts into `sink`, then waits until the bridge has delivered everything
    /// (unless the sink is the harness).
    func phase(
        _ name: String, ticks: Int, spread: Bool, firstTick: Int, sequence: inout UInt64, harness: Bool
    ) -> PhaseResult {
        let devices = options.devices
        let tickNanoseconds = Int64(options.tickMilliseconds) * 1_000_000
        let bridge = self.bridge
        let sink: Sink =
            harness
            ? { _, _, _, _ in }
            : { device, sequence, readings, payload in
                try bridge.submit(
                    device: "d\(device)", sequence: sequence, succeeded: true, readings: readings, payload: payload)
            }
        var submits: [Int64] = []
        var lateness: [Int64] = []
        submits.reserveCapacity(devices * ticks)
        lateness.reserveCapacity(devices * ticks)
        let deliveredBefore = bridge.statistics.delivered
        let cpuStart = nanoseconds(CLOCK_PROCESS_CPUTIME_ID)
        let usageStart = rusageMicroseconds()
        let wallStart = nanoseconds(CLOCK_MONOTONIC)
        var lastSubmitted = wallStart
        for tick in 0..<ticks {
            let start = nanoseconds(CLOCK_MONOTONIC) + 5_000_000
            let realtimeOffset = nanoseconds(CLOCK_REALTIME) - nanoseconds(CLOCK_MONOTONIC)
            let timestamp = timestampText(realtime: start + realtimeOffset)
            for device in 1...devices {
                let scheduled = spread ? start + Int64(device - 1) * tickNanoseconds / Int64(devices) : start
                sleep(untilMonotonic: scheduled)
                let payload = recordLine(
                    device: device, sequence: sequence, tick: firstTick + tick, timestamp: timestamp,
                    run: options.run, phase: name, pollEnd: scheduled + realtimeOffset)
                let values = readings(device: device, tick: firstTick + tick)
                let before = nanoseconds(CLOCK_MONOTONIC)
                do {
                    try sink(device, sequence, values, payload)
                } catch {
                    fail("submit: \(error)")
                }
                let after = nanoseconds(CLOCK_MONOTONIC)
                lastSubmitted = after
                lateness.append(before - scheduled)
                submits.append(after - before)
                sequence += 1
            }
            if spread {
                // The tick's length, measured from its first record: the next one starts a whole tick later.
                sleep(untilMonotonic: start + tickNanoseconds)
            } else if !harness {
                waitForDelivery(deliveredBefore + UInt64((tick + 1) * devices))
            }
        }
        if !harness { waitForDelivery(deliveredBefore + UInt64(ticks * devices)) }
        let end = nanoseconds(CLOCK_MONOTONIC)
        let usageEnd = rusageMicroseconds()
        return PhaseResult(
            name: name, records: devices * ticks, cpuNanoseconds: nanoseconds(CLOCK_PROCESS_CPUTIME_ID) - cpuStart,
            userMicroseconds: usageEnd.user - usageStart.user, systemMicroseconds: usageEnd.system - usageStart.system,
            wallNanoseconds: end - wallStart, drainNanoseconds: end - lastSubmitted, submits: submits.sorted(),
            lateness: lateness.sorted())
    }

    /// Polls the bridge's statistics every 0.5 ms (a spread tick is long delivered by then: this costs little).
    private func waitForDelivery(_ target: UInt64) {
        let deadline = nanoseconds(CLOCK_MONOTONIC) + 120_000_000_000
        while bridge.statistics.delivered < target {
            if nanoseconds(CLOCK_MONOTONIC) > deadline {
                fail("the bridge delivered \(bridge.statistics.delivered) of \(target) records in 120 s")
            }
            usleep(500)
        }
    }
}

private func report(_ result: PhaseResult, harnessPerRecord: Double?) {
    let perRecord = Double(result.cpuNanoseconds) / 1_000 / Double(result.records)
    var fields = [
        "phase=\(result.name)", "records=\(result.records)",
        "cpu_us_per_record=\(String(format: "%.2f", perRecord))",
    ]
    if let harnessPerRecord {
        fields.append("net_cpu_us_per_record=\(String(format: "%.2f", perRecord - harnessPerRecord))")
    }
    fields += [
        "user_us_per_record=\(String(format: "%.2f", Double(result.userMicroseconds) / Double(result.records)))",
        "sys_us_per_record=\(String(format: "%.2f", Double(result.systemMicroseconds) / Double(result.records)))",
        "wall_ms=\(String(format: "%.1f", Double(result.wallNanoseconds) / 1e6))",
        "drain_ms=\(String(format: "%.2f", Double(result.drainNanoseconds) / 1e6))",
        "submit_p50_us=\(String(format: "%.1f", Double(percentile(result.submits, 0.5)) / 1e3))",
        "submit_p99_us=\(String(format: "%.1f", Double(percentile(result.submits, 0.99)) / 1e3))",
        "submit_max_us=\(String(format: "%.1f", Double(result.submits.last ?? 0) / 1e3))",
        "late_p50_us=\(String(format: "%.1f", Double(percentile(result.lateness, 0.5)) / 1e3))",
        "late_p99_us=\(String(format: "%.1f", Double(percentile(result.lateness, 0.99)) / 1e3))",
    ]
    print(fields.joined(separator: " "))
    fflush(nil)  // all streams: `stdout` itself is a global var Swift 6 will not touch
}

private func main() async {
    let options = Options(Array(CommandLine.arguments.dropFirst()))
    guard !options.spool.isEmpty else { fail("--spool DIR is required (a temporary directory of its own)") }
    var logger = Logger(label: "mqtt-bench")
    logger.logLevel = .warning
    let configuration = BridgeConfiguration(
        mqtt: MQTTConfiguration(host: "127.0.0.1", port: options.port, clientID: ""), topicPrefix: "keepalive",
        gateway: "bench", discovery: false, spoolDirectory: options.spool, syncPolicy: options.sync)
    let devices = (1...options.devices).map { number in
        BridgeDevice(
            name: "d\(number)", address: "C0:FF:EE:00:\(hexByte(number >> 8)):\(hexByte(number & 0xFF))",
            interval: .seconds(30),
            expectedReadings: [
                .init(name: "battery", unit: "%"), .init(name: "temperature", unit: "°C"),
                .init(name: "humidity", unit: "%"),
            ])
    }
    let bridge: MQTTBridge
    let initStart = nanoseconds(CLOCK_MONOTONIC)
    do {
        bridge = try MQTTBridge(configuration: configuration, devices: devices, logger: logger)
    } catch {
        fail("\(error)")
    }
    print(
        """
            init devices=\(options.devices) \
            init_ms=\(String(format: "%.1f", Double(nanoseconds(CLOCK_MONOTONIC) - initStart) / 1e6))
            """
    )
    let running = Task { try await bridge.run() }
    let connectDeadline = nanoseconds(CLOCK_MONOTONIC) + 30_000_000_000
    while !bridge.statistics.connected {
        if nanoseconds(CLOCK_MONOTONIC) > connectDeadline { fail("no connection to 127.0.0.1:\(options.port)") }
        try? await Task.sleep(for: .milliseconds(5))
    }
    let generator = Generator(options: options, bridge: bridge)
    let results: [PhaseResult] = await withCheckedContinuation { continuation in
        // The poll engine's role on a thread of its own, as the daemon's record sink runs outside the bridge.
        let thread = Thread {
            var sequence: UInt64 = 0
            var results: [PhaseResult] = []
            results.append(
                generator.phase(
                    "harness-spread", ticks: 1, spread: true, firstTick: 0, sequence: &sequence, harness: true))
            results.append(
                generator.phase(
                    "harness-burst", ticks: 1, spread: false, firstTick: 0, sequence: &sequence, harness: true))
            sequence = 0
            results.append(
                generator.phase("warmup", ticks: 1, spread: true, firstTick: 0, sequence: &sequence, harness: false))
            if options.ticks > 0 {
                results.append(
                    generator.phase(
                        "spread", ticks: options.ticks, spread: true, firstTick: 1, sequence: &sequence, harness: false)
                )
            }
            if options.bursts > 0 {
                results.append(
                    generator.phase(
                        "burst", ticks: options.bursts, spread: false, firstTick: 1 + options.ticks,
                        sequence: &sequence, harness: false))
            }
            continuation.resume(returning: results)
        }
        thread.start()
    }
    let harnessSpread = results.first { $0.name == "harness-spread" }.map {
        Double($0.cpuNanoseconds) / 1_000 / Double($0.records)
    }
    let harnessBurst = results.first { $0.name == "harness-burst" }.map {
        Double($0.cpuNanoseconds) / 1_000 / Double($0.records)
    }
    for result in results {
        let harness = result.name.hasPrefix("harness") ? nil : (result.name == "burst" ? harnessBurst : harnessSpread)
        report(result, harnessPerRecord: harness)
    }
    let statistics = bridge.statistics
    print("bridge spooled=\(statistics.spooled) delivered=\(statistics.delivered) pending=\(statistics.pending)")
    running.cancel()
    _ = try? await running.value
}

await main()
