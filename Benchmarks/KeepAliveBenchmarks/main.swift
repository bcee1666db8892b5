// Release benchmarks for the core (not tests): `swift run -c release KeepAliveBenchmarks [--quick]`.
//
// 1. Ledger begin/end pairs per second (one thread, then two).
// 2. Scheduler overhead per registration per tick with 10,000 trivial callbacks.
// 3. Scheduler + poll engine overhead per device per tick with 10,000 MockTransport devices
//    (connect → read → disconnect, zero latency): CPU time (getrusage) divided by devices.
//
// `KeepAliveBenchmarks --lateness INTERVAL_MS TICKS` instead measures tick lateness on the real clock (issue
// #8): one registration on a KeepAlive with its default clock, TICKS ticks after tick 0 (which fires at start);
// for each, how late the scheduler woke (TickReport.fired − scheduled) and how late the callback started (its
// window's now − scheduled).
// Prints one line: `lateness interval_ms=… ticks=… fired_p50_us=… … began_max_us=…`.
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import KeepAlive
import Polling
import KeepAliveTesting
import Logging
import Basics
import CoreMetrics
import KeepAliveDaemon

let quick = CommandLine.arguments.contains("--quick")
let logger = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })

func cpuTime() -> Duration {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    let micros =
        (Int64(usage.ru_utime.tv_sec) + Int64(usage.ru_stime.tv_sec)) * 1_000_000
        + Int64(usage.ru_utime.tv_usec) + Int64(usage.ru_stime.tv_usec)
    return .microseconds(micros)
}

func format(_ value: Double, _ digits: Int = 2) -> String {
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let rounded = (value * scale).rounded() / scale
    return "\(rounded)"
}

func microseconds(_ duration: Duration) -> Double {
    duration.secondsDouble * 1_000_000
}

extension Duration {
    var secondsDouble: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

// MARK: 1. Ledger

/// `keepOneOpen`: another window stays open throughout, as during a tick; otherwise every end empties the
/// ledger, which stops its timer driver and the next begin starts it again (the worst case).
func benchmarkLedger(pairs: Int, keepOneOpen: Bool) throws -> (perSecond: Double, cpuPerPair: Duration) {
    let ledger = try BackgroundTaskLedger(clock: ContinuousClock(), logger: logger)
    let held = keepOneOpen ? ledger.begin(name: "held", budget: .seconds(3_600)) : .invalid
    defer { ledger.end(held) }
    // Warm up (first begin starts the driver).
    for _ in 0..<1_000 { ledger.end(ledger.begin(name: "warm", budget: .seconds(20))) }
    let cpuStart = cpuTime()
    let start = ContinuousClock.now
    for _ in 0..<pairs {
        let id = ledger.begin(name: "device", budget: .seconds(20))
        ledger.end(id)
    }
    let elapsed = ContinuousClock.now - start
    let cpu = cpuTime() - cpuStart
    return (Double(pairs) / elapsed.secondsDouble, cpu / pairs)
}

func benchmarkLedgerTwoThreads(pairsEach: Int) async throws -> Double {
    let ledger = try BackgroundTaskLedger(clock: ContinuousClock(), logger: logger)
    let held = ledger.begin(name: "held", budget: .seconds(3_600))
    defer { ledger.end(held) }
    let start = ContinuousClock.now
    await withTaskGroup(of: Void.self) { group in
        for _ in 0..<2 {
            group.addTask {
                for _ in 0..<pairsEach { ledger.end(ledger.begin(name: "device", budget: .seconds(20))) }
            }
        }
    }
    return Double(2 * pairsEach) / (ContinuousClock.now - start).secondsDouble
}

/// Counts completions; a waiter sleeps until a target is reached (no spinning: the CPU measured is the
/// scheduler's and the engine's, not the benchmark's).
final class Counter: Sendable {
    private let state = Locked<(count: Int, target: Int, waiter: CheckedContinuation<Void, Never>?)>((0, .max, nil))

    func increment() {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            state.count += 1
            guard state.count >= state.target, let waiter = state.waiter else { return nil }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    func wait(for target: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state in
                if state.count >= target { return true }
                state.target = target
                state.waiter = continuation
                return false
            }
            if done { continuation.resume() }
        }
    }
}

// MARK: 2 & 3. Scheduler and poll engine on a manual clock

/// Runs `ticks` ticks of a scheduler with `devices` registrations; returns CPU per device per tick and wall
/// time per tick. `withEngine` polls MockTransport devices through the PollEngine; otherwise each
/// registration is a trivial callback.
func benchmarkTicks(devices: Int, ticks: Int, withEngine: Bool, metrics: MetricsRegistry? = nil) async throws -> (
    cpuPerDevice: Duration, wallPerTick: Duration
) {
    let clock = TestClock()
    let keepAlive = try KeepAlive(configuration: .init(interval: .seconds(30)), clock: clock, logger: logger)
    let completed = Counter()
    var engine: PollEngine?
    var consumer: Task<Void, Never>?
    if withEngine {
        let transport = MockTransport(clock: clock)
        let battery = BluetoothUUID(assigned: 0x2A19)
        var specs: [PeripheralSpec] = []
        for index in 0..<devices {
            let address =
                "AA:BB:"
                + [index >> 24, index >> 16, index >> 8, index].map {
                    let byte = $0 & 0xFF
                    return (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
                }.joined(separator: ":")
            let peripheral = Peripheral(address: address, adapter: "hci\(index % 4)")
            transport.add(peripheral, characteristics: [battery: .counter { UInt8(truncatingIfNeeded: $0) }])
            specs.append(PeripheralSpec(name: "d\(index)", peripheral: peripheral, reads: [battery]))
        }
        let pollEngine = try PollEngine(
            peripherals: specs,
            transport: transport,
            keepAlive: keepAlive,
            configuration: .init(maxConnections: 64, metricsFactory: metrics ?? NOOPMetricsHandler.instance),
            logger: logger
        )
        let records = pollEngine.records()
        consumer = Task {
            for await _ in records { completed.increment() }
        }
        engine = pollEngine
    } else {
        for index in 0..<devices {
            try keepAlive.register(name: "r\(index)", onReport: { _ in completed.increment() }) { _ in .noData }
        }
    }
    _ = engine
    let run = Task { try await keepAlive.run() }
    func waitFor(_ target: Int) async {
        await completed.wait(for: target)
    }
    await waitFor(devices)  // tick 0 (warm-up: first allocations, first grid)
    let cpuStart = cpuTime()
    let wallStart = ContinuousClock.now
    for tick in 1...ticks {
        let deadline = TestClock.Instant(offset: .seconds(30) * tick)
        try await clock.waitForSleeper(until: deadline, timeout: .seconds(600))
        clock.advance(to: deadline)
        await waitFor(devices * (tick + 1))
    }
    let cpu = cpuTime() - cpuStart
    let wall = ContinuousClock.now - wallStart
    run.cancel()
    try? await run.value
    consumer?.cancel()
    return (cpu / (devices * ticks), wall / ticks)
}

/// A registry holding what one adapter's 100 devices report after a poll each (the engine's own series), rendered
/// `renders` times as Prometheus text; CPU per render and the text's size.
func benchmarkMetricsRender(devices: Int, renders: Int) async throws -> (cpu: Duration, bytes: Int) {
    let metrics = MetricsRegistry()
    let clock = TestClock()
    let keepAlive = try KeepAlive(configuration: .init(interval: .seconds(30)), clock: clock, logger: logger)
    let transport = MockTransport(clock: clock)
    let battery = BluetoothUUID(assigned: 0x2A19)
    var specs: [PeripheralSpec] = []
    for index in 0..<devices {
        let peripheral = Peripheral(
            address: "AA:BB:CC:DD:00:\(index < 16 ? "0" : "")\(String(index, radix: 16))", adapter: "hci0")
        transport.add(peripheral, characteristics: [battery: .counter { UInt8(truncatingIfNeeded: $0) }])
        specs.append(PeripheralSpec(name: "sensor-\(index)", peripheral: peripheral, reads: [battery]))
    }
    let engine = try PollEngine(
        peripherals: specs, transport: transport, keepAlive: keepAlive,
        configuration: .init(maxConnections: 64, metricsFactory: metrics), logger: logger)
    let completed = Counter()
    let records = engine.records()
    let consumer = Task { for await _ in records { completed.increment() } }
    let run = Task { try await keepAlive.run() }
    await completed.wait(for: devices)
    var bytes = 0
    let start = cpuTime()
    for _ in 0..<renders { bytes = metrics.render(.prometheus).utf8.count }
    let cpu = cpuTime() - start
    run.cancel()
    try? await run.value
    consumer.cancel()
    return (cpu / renders, bytes)
}

// MARK: 4. Tick lateness on the real clock

/// Runs one registration for `ticks` ticks on the scheduler's default (real) clock; returns, in microseconds
/// per tick after the first, how late the scheduler fired and how late the callback's window began, and how late
/// tick 0 fired.
func benchmarkLateness(interval: Duration, ticks: Int) async throws -> (fired: [Double], began: [Double], first: Double)
{
    let keepAlive = try KeepAlive(configuration: .init(interval: interval), logger: logger)
    let started = Locked<[UInt64: KeepAliveInstant]>([:])
    let reports = Locked<[(tick: UInt64, scheduled: KeepAliveInstant, fired: KeepAliveInstant)]>([])
    let completed = Counter()
    try keepAlive.register(
        name: "lateness",
        options: .init(maxTicks: UInt64(ticks)),
        onReport: { report in
            reports.withLock { $0.append((report.tick, report.scheduled, report.fired)) }
            completed.increment()
        }
    ) { window in
        // The window's clock, read through the public API: now = deadline − time remaining.
        let now = window.deadline.advanced(by: .zero - window.timeRemaining)
        started.withLock { $0[window.tick] = now }
        return .noData
    }
    let run = Task { try await keepAlive.run() }
    await completed.wait(for: ticks)
    run.cancel()
    _ = try? await run.value
    let began = started.withLock { $0 }
    var firedLateness: [Double] = []
    var beganLateness: [Double] = []
    // Tick 0 fires "at start": its lateness is the scheduler's start-up, reported apart (first_us).
    for report in reports.withLock({ $0 }) where report.tick > 0 {
        firedLateness.append(microseconds(report.scheduled.duration(to: report.fired)))
        if let start = began[report.tick] { beganLateness.append(microseconds(report.scheduled.duration(to: start))) }
    }
    let first = reports.withLock { $0.first { $0.tick == 0 } }.map { microseconds($0.scheduled.duration(to: $0.fired)) }
    return (firedLateness, beganLateness, first ?? .nan)
}

func percentile(_ values: [Double], _ fraction: Double) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    let rank = Int((fraction * Double(sorted.count - 1)).rounded())
    return sorted[min(max(rank, 0), sorted.count - 1)]
}

if let flag = CommandLine.arguments.firstIndex(of: "--lateness") {
    let arguments = CommandLine.arguments
    let intervalMilliseconds = flag + 1 < arguments.count ? Int(arguments[flag + 1]) ?? 1_000 : 1_000
    let ticks = flag + 2 < arguments.count ? Int(arguments[flag + 2]) ?? 600 : 600
    let (fired, began, first) = try await benchmarkLateness(
        interval: .milliseconds(intervalMilliseconds), ticks: ticks + 1)
    var line = "lateness interval_ms=\(intervalMilliseconds) ticks=\(fired.count) first_us=\(format(first, 1))"
    for (name, values) in [("fired", fired), ("began", began)] {
        line +=
            """
                 \(name)_p50_us=\(format(percentile(values, 0.5), 1)) \
                \(name)_p99_us=\(format(percentile(values, 0.99), 1))
                """
            + " \(name)_max_us=\(format(values.max() ?? .nan, 1)) \(name)_min_us=\(format(values.min() ?? .nan, 1))"
    }
    print(line)
    exit(0)
}

// MARK: Report

print("KeepAlive core benchmarks (release\(quick ? ", quick" : ""))")
print(String(repeating: "-", count: 72))

let pairs = quick ? 200_000 : 2_000_000
for keepOneOpen in [true, false] {
    let ledger = try benchmarkLedger(pairs: pairs, keepOneOpen: keepOneOpen)
    print(
        "ledger begin/end, 1 thread, \(keepOneOpen ? "others open:    " : "from empty each:")  "
            + """
                \(format(ledger.perSecond / 1e6, 3)) M pairs/s   \
                (\(format(microseconds(ledger.cpuPerPair) * 1_000, 0)) ns CPU per pair)
                """
    )
}
let twoThreads = try await benchmarkLedgerTwoThreads(pairsEach: pairs / 2)
print("ledger begin/end, 2 threads, others open:      \(format(twoThreads / 1e6, 3)) M pairs/s")

let devices = quick ? 1_000 : 10_000
let ticks = quick ? 3 : 10
let scheduler = try await benchmarkTicks(devices: devices, ticks: ticks, withEngine: false)
print(
    """
        scheduler, \(devices) callbacks:     \(format(microseconds(scheduler.cpuPerDevice))) µs CPU per callback per \
        tick, 
        """
        + "\(format(microseconds(scheduler.wallPerTick) / 1_000)) ms wall per tick"
)
let engineResult = try await benchmarkTicks(devices: devices, ticks: ticks, withEngine: true)
print(
    """
        scheduler + poll engine, \(devices) mock devices: \(format(microseconds(engineResult.cpuPerDevice))) µs CPU \
        per device per tick, 
        """
        + "\(format(microseconds(engineResult.wallPerTick) / 1_000)) ms wall per tick"
)

// The engine's metrics (issue #37): the same ticks with a registry as the factory, then what one render of a
// registry with 100 devices' series costs (a textfile write, a scrape).
let metered = try await benchmarkTicks(devices: devices, ticks: ticks, withEngine: true, metrics: MetricsRegistry())
print(
    """
    scheduler + poll engine, \(devices) mock devices, with metrics: \(format(microseconds(metered.cpuPerDevice))) \
    µs CPU per device per tick
    """
)
let render = try await benchmarkMetricsRender(devices: 100, renders: quick ? 200 : 2_000)
print("metrics render, 100 devices: \(format(microseconds(render.cpu))) µs CPU per render, \(render.bytes) bytes")

let readingIterations = quick ? 100_000 : 1_000_000
for (name, nanoseconds) in benchmarkReadings(iterations: readingIterations) {
    print("readings decode, \(name): \(format(nanoseconds, 0)) ns CPU per reading")
}
let line = benchmarkRecordLine(iterations: quick ? 100_000 : 1_000_000)
print(
    """
        record JSON line, 2 values: \(format(line.withReadings, 0)) ns CPU with their readings, \
        \(format(line.withoutReadings, 0)) ns without
        """
)
