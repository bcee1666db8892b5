import BlueZ
import DBus
import LocalServices
import TestHarness
import KeepAlive
import Polling
import Logging
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// One suite for every BlueZ a test rig has: the simulator (`make hil`), a real bluetoothd in the qemu lab
/// (`make lab`), real hardware (README, "Hardware in the loop"). It touches only what the environment names and
/// leaves the peripheral disconnected, whatever happens.
@Suite(
    "Hardware in the loop",
    .serialized,
    .enabled(
        if: HILEnvironment.isGiven,
        "no environment: set KEEPALIVE_HIL_BUS and KEEPALIVE_HIL_PERIPHERAL (README: Hardware in the loop)")
)
struct HILTests {
    @Test func discoversThePeripheral() async throws {
        try await HILSession.with { session in
            let started = ContinuousClock.now
            let found = try await withTimeout(
                "\(session.environment.peripheral.address) to be discovered", .seconds(30)
            ) {
                for try await advertisement in session.transport.discover(
                    on: session.environment.adapter, filter: DiscoveryFilter())
                where advertisement.peripheral == session.environment.peripheral {
                    return advertisement
                }
                throw HILFailure("discovery ended without finding \(session.environment.peripheral.address)")
            }
            HILReport.line(
                """
                    discover: \(found.peripheral.address) name=\(found.name ?? "-") \
                    rssi=\(found.rssi.map(String.init) ?? "-") after \(HILReport.milliseconds(since: started))
                    """
            )
        }
    }

    @Test func connectsReadsAndDisconnects() async throws {
        try await HILSession.with { session in
            let environment = session.environment
            let connected = try await session.connect()
            let started = ContinuousClock.now
            let value = try await session.transport.read(environment.counter, from: environment.peripheral)
            let read = HILReport.milliseconds(since: started)
            #expect(value.count == 4, "the counter is a UInt32: \(value)")
            let disconnectStarted = ContinuousClock.now
            await session.transport.disconnect(environment.peripheral, timeout: .seconds(10))
            try await session.waitUntilDisconnected()
            HILReport.line(
                """
                    connect \(connected), read \(read) (\(value.count) bytes), disconnect \
                    \(HILReport.milliseconds(since: disconnectStarted))
                    """
            )
        }
    }

    /// The link time is bluetoothd's own Connected true → false, known once disconnect returns: more than
    /// nothing, and no more than the connect → disconnect that made it.
    @Test func linkTimeIsKnownOnceDisconnectReturnsAndFitsItsPoll() async throws {
        try await HILSession.with { session in
            let environment = session.environment
            let started = ContinuousClock.now
            _ = try await session.connect()
            _ = try await session.transport.read(environment.counter, from: environment.peripheral)
            let disconnectStarted = ContinuousClock.now
            await session.transport.disconnect(environment.peripheral, timeout: .seconds(10))
            let poll = started.duration(to: .now)
            let link = try #require(
                session.transport.linkTime(of: environment.peripheral), "no link time once disconnect returned")
            #expect(link > .zero && link <= poll, "link \(link), poll \(poll)")
            HILReport.line(
                """
                    link: \(HILReport.milliseconds(link)) of a \(HILReport.milliseconds(poll)) poll (disconnect \
                    \(HILReport.milliseconds(since: disconnectStarted)))
                    """
            )
        }
    }

    @Test func notificationsCountUpWithoutGaps() async throws {
        try await HILSession.with { session in
            let environment = session.environment
            _ = try await session.connect()
            let stream = try await session.transport.notifications(
                from: environment.counter, of: environment.peripheral)
            let started = ContinuousClock.now
            let counters = try await withTimeout("30 notifications", .seconds(30)) {
                var counters: [UInt32] = []
                for try await value in stream {
                    counters.append(try HILValue.counter(value))
                    if counters.count == 30 { break }
                }
                return counters
            }
            let elapsed = started.duration(to: .now)
            await session.transport.disconnect(environment.peripheral, timeout: .seconds(10))
            try await session.waitUntilDisconnected()
            let gaps = zip(counters, counters.dropFirst()).filter { $1 != $0 &+ 1 }
            #expect(counters.count == 30)
            #expect(gaps.isEmpty, "the counter skipped or repeated: \(gaps.map { "\($0)→\($1)" })")
            let milliseconds = max(
                1, elapsed.components.seconds * 1_000 + elapsed.components.attoseconds / 1_000_000_000_000_000)
            HILReport.line(
                """
                    notify: \(counters.count) values \(counters.first ?? 0)…\(counters.last ?? 0), \(gaps.count) \
                    gaps, \(Int64(counters.count - 1) * 1_000 / milliseconds)/s
                    """
            )
        }
    }

    @Test func writtenValuesReadBack() async throws {
        try await HILSession.with { session in
            let environment = session.environment
            _ = try await session.connect()
            let original = try await session.transport.read(environment.setting, from: environment.peripheral)
            let first = UInt8.random(in: 0x10...0x7f)
            try await session.transport.write(
                [first], to: environment.setting, of: environment.peripheral, type: .request)
            let afterRequest = try await session.transport.read(environment.setting, from: environment.peripheral)
            // A write command has no answer, but ATT keeps one bearer's PDUs in order: the read comes after it.
            let second = first &+ 0x80
            try await session.transport.write(
                [second], to: environment.setting, of: environment.peripheral, type: .command)
            let afterCommand = try await session.transport.read(environment.setting, from: environment.peripheral)
            try await session.transport.write(
                original, to: environment.setting, of: environment.peripheral, type: .request)
            await session.transport.disconnect(environment.peripheral, timeout: .seconds(10))
            try await session.waitUntilDisconnected()
            #expect(afterRequest == [first])
            #expect(afterCommand == [second])
            HILReport.line(
                """
                    write: request \(first) → read \(afterRequest), command \(second) → read \(afterCommand), \
                    restored \(original)
                    """
            )
        }
    }

    @Test func anAbsentAddressFailsTypedWithinItsDeadline() async throws {
        try await HILSession.with { session in
            let environment = session.environment
            let timeout = Duration.seconds(5)
            let started = ContinuousClock.now
            let error = await #expect(throws: TransportError.self) {
                try await session.transport.connect(
                    environment.absent,
                    options: ConnectOptions(timeout: timeout, characteristics: [environment.counter]))
            }
            let elapsed = started.duration(to: .now)
            await session.transport.disconnect(environment.absent, timeout: .seconds(10))
            #expect(
                elapsed < timeout + .seconds(3),
                "connect to an absent device took \(elapsed) with a \(timeout) deadline")
            if let error {
                #expect([.deviceNotFound, .connectionAborted, .timeout].contains(error.code), "\(error)")
                HILReport.line(
                    """
                        absent \(environment.absent.address): \(error.code) after \
                        \(HILReport.milliseconds(since: started)): \(error.message)
                        """
                )
            }
        }
    }

    @Test(
        .enabled(
            if: HILEnvironment.current.flatMap { try? $0.get() }.map {
                $0.peripheralOff != nil && $0.peripheralOn != nil
            } ?? true,
            "KEEPALIVE_HIL_PERIPHERAL_OFF and _ON are not set"))
    func peripheralPowerOffIsALinkLossAndPowerOnRecovers() async throws {
        try await HILSession.with { session in
            let environment = session.environment
            guard let off = environment.peripheralOff, let on = environment.peripheralOn else { return }
            _ = try await session.connect()
            let stream = try await session.transport.notifications(
                from: environment.counter, of: environment.peripheral)
            let started = ContinuousClock.now
            do {
                try await HILShell.run(off)
                let ending = try await session.end(of: stream, after: "the peripheral powered off")
                let lost = HILReport.milliseconds(since: started)
                #expect(ending != nil, "the stream finished without a typed error")
                try await session.waitUntilDisconnected(within: .seconds(30))
                HILReport.line(
                    "power off: link lost after \(lost) (\(ending.map { "\($0.code): \($0.message)" } ?? "no error"))")
            } catch {
                try? await HILShell.run(on)
                throw error
            }
            await session.transport.disconnect(environment.peripheral, timeout: .seconds(10))
            try await HILShell.run(on)
            let recovered = ContinuousClock.now
            let attempts = try await session.readEventually(within: .seconds(90))
            HILReport.line(
                "power on: read again after \(HILReport.milliseconds(since: recovered)) (\(attempts) attempts)")
        }
    }

    @Test(
        .enabled(
            if: HILEnvironment.current.flatMap { try? $0.get() }.map { $0.restartBluetoothd != nil } ?? true,
            "KEEPALIVE_HIL_RESTART_BLUETOOTHD is not set"))
    func bluetoothdRestartFailsTheLinkAtOnceAndPollingResumes() async throws {
        try await HILSession.with { session in
            let environment = session.environment
            guard let restart = environment.restartBluetoothd else { return }
            _ = try await session.connect()
            let stream = try await session.transport.notifications(
                from: environment.counter, of: environment.peripheral)
            let syncs = session.transport.cache.syncCount
            let started = ContinuousClock.now
            try await HILShell.run(restart)
            let ending = try await session.end(of: stream, after: "bluetoothd restarted")
            #expect(ending != nil, "the stream finished without a typed error")
            HILReport.line(
                """
                    restart: in-flight ended after \(HILReport.milliseconds(since: started)) \
                    (\(ending.map { "\($0.code): \($0.message)" } ?? "no error"))
                    """
            )
            // "Ready" can still be the old bluetoothd's tree, its adapter already removed (a CI run read
            // `adapters: none` 8 ms after the link ended): wait for the tree fetched from the new one, adapter in it.
            try await waitUntil(
                "org.bluez back, its tree fetched again, with \(environment.adapter)", timeout: .seconds(60)
            ) {
                session.transport.cache.syncCount > syncs
                    && (try? session.transport.checkAdapter(environment.adapter)) != nil
            }
            let ready = HILReport.milliseconds(since: started)
            await session.transport.disconnect(environment.peripheral, timeout: .seconds(10))
            let attempts = try await session.readEventually(within: .seconds(90))
            HILReport.line(
                """
                    restart: org.bluez back after \(ready), read again after \
                    \(HILReport.milliseconds(since: started)) (\(attempts) attempts)
                    """
            )
        }
    }

    /// The daemon end to end: `keepalive run --ticks K` writes exactly one record per tick, each with the counter.
    @Test func theDaemonPollsEveryTickOnce() async throws {
        let environment = try HILEnvironment.load()
        let configuration = """
            interval: 5s
            jitter: 0s
            window_budget: 4s
            low_power: {mode: off}
            adapter: \(environment.adapter)
            devices:
              - name: hil
                address: \(environment.peripheral.address)
                read: [\(environment.counter)]
            """
        let file = try TemporaryFile(name: "hil.yaml", contents: configuration)
        defer { file.remove() }
        let started = ContinuousClock.now
        let run = try await CommandProcess.run(
            [
                "run", "--config", file.path, "--bus", environment.busName, "--ticks", String(environment.ticks),
                "--output", "-",
            ],
            within: .seconds(Int64(environment.ticks) * 5 + 90))
        #expect(run.status == 0, "keepalive run exited \(run.status): \(run.stderr.suffix(2_000))")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(
            lines.count == environment.ticks, "\(lines.count) records for \(environment.ticks) ticks:\n\(run.stdout)")
        // The daemon's log says why a poll failed (the record only says how).
        if lines.contains(where: { $0.contains("\"result\":\"failed\"") }) {
            HILReport.line("daemon log:\n\(run.stderr.suffix(6_000))")
        }
        for (index, line) in lines.enumerated() {
            #expect(line.contains("\"seq\":\(index),"), "record \(index) out of sequence: \(line)")
            #expect(line.contains("\"tick\":\(index),"), "record \(index) is not tick \(index): \(line)")
            #expect(!line.contains("\"result\":\"failed\""), "tick \(index) failed: \(line)")
            #expect(
                line.contains("\"values\":{\"\(environment.counter)\":\""),
                "tick \(index) has no counter value: \(line)")
            #expect(line.contains("\"outcome\":\"completed\""), "tick \(index)'s window did not complete: \(line)")
            // The link's time is BlueZ's own, known by the record: more than nothing, within the 4-s window.
            let link = HILRecord.integer("link_ms", in: line)
            #expect(link.map { $0 > 0 && $0 <= 4_000 } == true, "tick \(index)'s link_ms is not plausible: \(line)")
        }
        let links = lines.compactMap { HILRecord.integer("link_ms", in: $0) }.map(String.init)
        HILReport.line(
            """
                daemon: \(lines.count) records for \(environment.ticks) ticks in \
                \(HILReport.milliseconds(since: started)), link_ms \(links.joined(separator: ", "))
                """
        )
    }
}

/// A connection to the bus under test and a BlueZTransport on it; on the way out the peripheral is disconnected
/// and must read Connected=false.
struct HILSession: Sendable {
    let environment: HILEnvironment
    let transport: BlueZTransport

    static let logger = Logger(label: "hil", factory: { _ in SwiftLogNoOpLogHandler() })

    static func with(_ body: @Sendable (HILSession) async throws -> Void) async throws {
        let environment = try HILEnvironment.load()
        let connection = try await DBusConnection(bus: environment.bus)
        let transport = BlueZTransport(connection: connection, logger: logger)
        let cache = Task { try await transport.run() }
        let session = HILSession(environment: environment, transport: transport)
        let result: Result<Void, any Error>
        do {
            try await transport.waitUntilReady(timeout: .seconds(30))
            // bluetoothd takes its name before it has probed its adapters (the simulator too, right after a
            // restart): the adapter may come a moment after "ready". One run saw `adapters: none` here.
            try await waitUntil("\(environment.adapter) present", timeout: .seconds(10)) {
                (try? transport.checkAdapter(environment.adapter)) != nil
            }
            _ = try transport.checkAdapter(environment.adapter)
            result = .success(try await body(session))
        } catch {
            result = .failure(error)
        }
        await transport.disconnect(environment.peripheral, timeout: .seconds(10))
        do {
            try await session.waitUntilDisconnected()
        } catch {
            Issue.record("the peripheral was left connected: \(error)")
        }
        cache.cancel()
        _ = await cache.result
        await connection.close()
        try result.get()
    }

    /// Connects under the environment's deadline, resolving the counter and the setting; returns how long it took.
    func connect() async throws -> String {
        let started = ContinuousClock.now
        try await transport.connect(
            environment.peripheral,
            options: ConnectOptions(
                timeout: environment.connectTimeout, characteristics: [environment.counter, environment.setting]))
        return HILReport.milliseconds(since: started)
    }

    /// Waits until BlueZ says the peripheral is not connected (or has no object at all).
    func waitUntilDisconnected(within limit: Duration = .seconds(10)) async throws {
        let path = try BlueZ.devicePath(environment.peripheral)
        let cache = transport.cache
        try await waitUntil("\(environment.peripheral.address) to read Connected=false", timeout: limit) {
            cache.device(path)?.connected != true
        }
    }

    /// Waits (at most 30 s) for a notification stream to end; returns its typed error (nil: it just finished).
    func end(of stream: AsyncThrowingStream<[UInt8], any Error>, after what: String) async throws -> TransportError? {
        try await withTimeout("the notifications to end after \(what)", .seconds(30)) {
            do {
                for try await _ in stream {}
                return nil
            } catch let error as TransportError {
                return error
            }
        }
    }

    /// Connect + read + disconnect, retried (a peripheral coming back must advertise again) until it works;
    /// returns the number of attempts.
    func readEventually(within limit: Duration) async throws -> Int {
        let deadline = ContinuousClock.now + limit
        var attempts = 0
        while true {
            attempts += 1
            do {
                _ = try await connect()
                let value = try await transport.read(environment.counter, from: environment.peripheral)
                await transport.disconnect(environment.peripheral, timeout: .seconds(10))
                try await waitUntilDisconnected()
                #expect(value.count == 4)
                return attempts
            } catch let error as TransportError where error.isTransient && ContinuousClock.now < deadline {
                HILReport.line("  attempt \(attempts): \(error.code): \(error.message)")
                await transport.disconnect(environment.peripheral, timeout: .seconds(10))
                try await Task.sleep(for: .seconds(1))
            }
        }
    }
}

enum HILRecord {
    /// The whole number `"key":N` of a record line; nil when absent or null.
    static func integer(_ key: String, in line: String) -> Int? {
        let needle = Array("\"\(key)\":".utf8)
        let bytes = Array(line.utf8)
        guard bytes.count >= needle.count else { return nil }
        for start in 0...(bytes.count - needle.count) where bytes[start..<start + needle.count].elementsEqual(needle) {
            let digits = bytes[(start + needle.count)...].prefix { UInt8(ascii: "0")...UInt8(ascii: "9") ~= $0 }
            return Int(String(decoding: digits, as: UTF8.self))
        }
        return nil
    }
}

enum HILValue {
    static func counter(_ bytes: [UInt8]) throws -> UInt32 {
        guard bytes.count == 4 else { throw HILFailure("a counter value is 4 bytes, not \(bytes.count): \(bytes)") }
        return bytes.reversed().reduce(0) { $0 << 8 | UInt32($1) }
    }
}

enum HILShell {
    /// Runs a fault command from the environment; a failing command fails the test with its output.
    static func run(_ command: String) async throws {
        let output = try await Subprocess.run(["/bin/sh", "-c", command])
        guard output.status == 0 else {
            throw HILFailure("`\(command)` exited \(output.status): \(output.standardError)\(output.standardOutput)")
        }
    }
}

/// Timings, one line each, for the lab's report.
enum HILReport {
    static func line(_ text: String) {
        print("hil: " + text)
    }

    static func milliseconds(since start: ContinuousClock.Instant) -> String {
        milliseconds(start.duration(to: .now))
    }

    static func milliseconds(_ duration: Duration) -> String {
        "\(duration.components.seconds * 1_000 + duration.components.attoseconds / 1_000_000_000_000_000) ms"
    }
}

struct HILFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
