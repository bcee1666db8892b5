import Dispatch
import KeepAlive
import Polling
import KeepAliveTesting
import Basics
import Testing

@Suite("Poll engine")
struct PollEngineTests {
    let clock = TestClock()
    let battery = BluetoothUUID(assigned: 0x2A19)
    let temperature = BluetoothUUID(assigned: 0x2A6E)
    let control = BluetoothUUID(assigned: 0x2A56)

    func sensor(_ index: Int, adapter: String = "hci0") -> Peripheral {
        Peripheral(
            address: "AA:BB:CC:00:00:" + (index < 16 ? "0" : "") + String(index, radix: 16, uppercase: true),
            adapter: adapter)
    }

    func makeKeepAlive(_ configuration: KeepAlive.Configuration = .init(interval: .seconds(30))) throws -> KeepAlive {
        try KeepAlive(configuration: configuration, clock: clock, logger: quietLogger)
    }

    func spec(_ index: Int, adapter: String = "hci0") -> PeripheralSpec {
        PeripheralSpec(name: "sensor-\(index)", peripheral: sensor(index, adapter: adapter), reads: [battery])
    }

    func addSensors(_ transport: MockTransport, _ indices: Range<Int>, adapter: String = "hci0") {
        for index in indices {
            transport.add(
                sensor(index, adapter: adapter),
                characteristics: [
                    battery: .counter { UInt8($0 % 100) },
                    temperature: .counter(every: .seconds(1)) { UInt8($0) },
                    control: .fixed([0]),
                ]
            )
        }
    }

    /// Walks the clock through exactly these instants (in ms), each once something sleeps until it: the retry
    /// schedule is asserted by the instants themselves.
    func step(through milliseconds: [Int64]) async throws {
        for value in milliseconds {
            let instant = clock.instant(.milliseconds(value))
            try await clock.waitForSleeper(until: instant)
            clock.advance(to: instant)
        }
    }

    /// Advances the clock from deadline to deadline (never reaching `limit`) until `done` holds.
    ///
    /// The wall-clock bound is a give-up, not a timing assertion: generous, because under ThreadSanitizer with
    /// every suite running beside this one a tick's retries took more than the 10 s it used to be, and CI's
    /// ThreadSanitizer run once finished no test at all for 70 s (so a sanitizer triples it). While nothing
    /// is due it waits a millisecond rather than spinning on `Task.yield()`, which on two cores kept a pool
    /// thread from the very work it was waiting for.
    func drive(
        _ clock: TestClock, before limit: TestClock.Instant, state: () -> String = { "" }, until done: () -> Bool
    ) async throws {
        let giveUp = ContinuousClock.now + .seconds(60) * Sanitizers.slowdown
        while !done() {
            guard ContinuousClock.now < giveUp else {
                throw TestClock.WaitTimeout(
                    description: """
                        drive: condition never held (now \(clock.now), limit \(limit), \
                        pending \(clock.pendingDeadlines)\(state()))
                        """)
            }
            if let next = clock.pendingDeadlines.first, next < limit {
                clock.advance(to: next)
                await Task.yield()
            } else {
                try await Task.sleep(for: .milliseconds(1))
            }
        }
    }

    /// Connect and disconnect calls pair up per device, and no link is left up.
    func expectAlwaysDisconnected(
        _ transport: MockTransport, _ peripherals: [Peripheral], sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(transport.connected.isEmpty, "links left up: \(transport.connected)", sourceLocation: sourceLocation)
        for peripheral in peripherals {
            let connects = transport.calls(.connect, on: peripheral).count
            let disconnects = transport.calls(.disconnect, on: peripheral).count
            #expect(
                connects == disconnects, "\(peripheral): \(connects) connects, \(disconnects) disconnects",
                sourceLocation: sourceLocation)
        }
    }

    @Test func neverExceedsMaxConnectionsAndServesEveryDevice() async throws {
        let transport = MockTransport(clock: clock, latency: .init(connect: .seconds(1)))
        addSensors(transport, 0..<10)
        let keepAlive = try makeKeepAlive()
        let engine = try PollEngine(
            peripherals: (0..<10).map { spec($0) },
            transport: transport,
            keepAlive: keepAlive,
            configuration: .init(maxConnections: 3),
            logger: quietLogger
        )
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            // Rounds of three 1-second connects: at 1, 2 and 3 s, then the last device at 4 s.
            for (round, count) in [(1, 3), (2, 3), (3, 3), (4, 1)] {
                let instant = clock.instant(.seconds(round))
                try await clock.waitForSleepers(count: count, until: instant)
                clock.advance(to: instant)
            }
            for _ in 0..<10 { _ = try await records.next() }
        }
        #expect(transport.maxSimultaneousConnections == 3)
        #expect(engine.maxSimultaneousConnections(adapter: "hci0") == 3)
        #expect(Set(records.all.map(\.device)).count == 10)
        #expect(records.all.allSatisfy { $0.result == .newData && $0.values.count == 1 })
        expectAlwaysDisconnected(transport, (0..<10).map { sensor($0) })
    }

    @Test func connectionLimitIsPerAdapter() async throws {
        let transport = MockTransport(clock: clock, latency: .init(connect: .seconds(1)))
        addSensors(transport, 0..<4, adapter: "hci0")
        addSensors(transport, 0..<4, adapter: "hci1")
        let keepAlive = try makeKeepAlive()
        let specs =
            (0..<4).map { spec($0, adapter: "hci0") }
            + (0..<4).map { PeripheralSpec(name: "b\($0)", peripheral: sensor($0, adapter: "hci1"), reads: [battery]) }
        let engine = try PollEngine(
            peripherals: specs, transport: transport, keepAlive: keepAlive, configuration: .init(maxConnections: 2),
            logger: quietLogger)
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            for round in 1...2 {
                let instant = clock.instant(.seconds(round))
                try await clock.waitForSleepers(count: 4, until: instant)
                clock.advance(to: instant)
            }
            for _ in 0..<8 { _ = try await records.next() }
        }
        #expect(engine.maxSimultaneousConnections(adapter: "hci0") == 2)
        #expect(engine.maxSimultaneousConnections(adapter: "hci1") == 2)
        #expect(transport.maxSimultaneousConnections == 4)
    }

    @Test func exactlyOneRecordPerDevicePerTickWithMixedFailures() async throws {
        let transport = MockTransport(clock: clock)
        addSensors(transport, 0..<5)
        transport.script(
            .read(battery), on: sensor(1), .alwaysFail(TransportError(.notPermitted, "Read not permitted")))
        transport.script(
            .connect, on: sensor(2),
            .fail(times: 1, with: TransportError(.connectionAborted, "le-connection-abort-by-local")))
        transport.vanish(sensor(3))
        let keepAlive = try makeKeepAlive()
        // Without placement: it places each device in the interval by the holds it learns, measured on this clock
        // while `drive` moves it, so under load a slow task's hold looked longer and a device could be placed past
        // the 5 s `drive` lets time run to (the full suite saw the condition never hold). Placement has tests of its
        // own; this one counts records.
        let engine = try PollEngine(
            peripherals: (0..<5).map { spec($0) }, transport: transport, keepAlive: keepAlive,
            configuration: .init(placement: false), logger: quietLogger)
        let records = Collector(engine.records())
        let ticks = 10
        try await withRunning(keepAlive) {
            for tick in 0..<ticks {
                if tick > 0 {
                    let instant = clock.instant(.seconds(30) * tick)
                    try await clock.waitForSleeper(until: instant)
                    clock.advance(to: instant)
                }
                // Retries sleep on the clock: let time run inside the tick until its five records are in. Only as far
                // as the retries' back-off reaches (3.85 s for 6 attempts), never to the windows' warning (13.3 s):
                // on a loaded machine a poll's task can still be waiting to run when only the warning is pending,
                // and moving the clock there ended the window under it (a full test run saw sensor-1's permanent
                // failure replaced so).
                let tickNumber = UInt64(tick)
                try await drive(
                    clock, before: clock.instant(.seconds(30) * tick + .seconds(5)),
                    state: {
                        "; tick \(tickNumber)'s records: "
                            + records.all.filter { $0.tick == tickNumber }.map { "\($0.device) \($0.result)" }
                            .joined(separator: ", ") + "; open windows: \(keepAlive.ledger.openEntries.map(\.name))"
                    }
                ) {
                    records.all.count { $0.tick == tickNumber } == 5
                }
            }
        }
        let all = records.all
        #expect(all.count == 5 * ticks)
        for device in 0..<5 {
            let ticksSeen = all.filter { $0.device == "sensor-\(device)" }.map(\.tick).sorted()
            #expect(ticksSeen == (0..<UInt64(ticks)).map { $0 }, "sensor-\(device)")
        }
        let permanent = all.filter { $0.device == "sensor-1" && $0.window != nil }
        #expect(
            permanent.allSatisfy {
                $0.failure?.code == "notPermitted" && $0.failure?.transient == false && $0.attempts == 1
            })
        let vanished = all.first { $0.device == "sensor-3" }
        #expect(vanished?.failure?.code == "deviceNotFound")
        expectAlwaysDisconnected(transport, (0..<5).map { sensor($0) })
        #expect(keepAlive.ledger.openCount == 0)
    }

    @Test func onRecordSeesEveryRecordBeforeTheStreamsAndMaxTicksEndsEachDevice() async throws {
        let transport = MockTransport(clock: clock)
        addSensors(transport, 0..<3)
        let keepAlive = try makeKeepAlive()
        let hooked = Locked<[PollRecord]>([])
        let records = Locked<Collector<PollRecord>?>(nil)
        let engine = try PollEngine(
            peripherals: (0..<3).map { spec($0) },
            transport: transport,
            keepAlive: keepAlive,
            configuration: .init(maxTicks: 4),
            logger: quietLogger,
            onRecord: { record in
                // Synchronous, and ahead of the stream: the stream has not got this record yet.
                let streamed = records.withLock { $0?.all.count } ?? 0
                hooked.withLock { hooked in
                    #expect(streamed <= hooked.count)
                    hooked.append(record)
                }
            }
        )
        records.withLock { $0 = Collector(engine.records()) }
        try await withRunning(keepAlive) {
            for tick in 0..<4 {
                if tick > 0 {
                    let instant = clock.instant(.seconds(30) * tick)
                    try await clock.waitForSleeper(until: instant)
                    clock.advance(to: instant)
                }
                let expected = 3 * (tick + 1)
                // Short of the windows' warning, as in exactlyOneRecordPerDevicePerTickWithMixedFailures.
                try await drive(clock, before: clock.instant(.seconds(30) * tick + .seconds(5))) {
                    hooked.withLock { $0.count } == expected
                }
            }
            // Done: nothing sleeps until the next grid point any more, and moving past it fires nothing.
            #expect(keepAlive.nextDeadline == nil)
            #expect(clock.pendingDeadlines.isEmpty)
            clock.advance(to: clock.instant(.seconds(300)))
            for _ in 0..<100 { await Task.yield() }
        }
        let all = hooked.withLock { $0 }
        #expect(all.count == 12)
        for device in 0..<3 {
            #expect(all.filter { $0.device == "sensor-\(device)" }.map(\.tick).sorted() == [0, 1, 2, 3])
        }
        #expect(keepAlive.nextDeadline == nil)
    }

    @Test func anExpiredWindowEndsWithoutWaitingForASlowDisconnectWhichStillHappensAndHoldsTheSlot() async throws {
        // A read longer than the window, and a disconnect (6 s, like BlueZ's 2–3 s) longer than the ledger's 2-s grace.
        let transport = MockTransport(clock: clock, latency: .init(read: .seconds(5), disconnect: .seconds(6)))
        addSensors(transport, 0..<1)
        let keepAlive = try makeKeepAlive(.init(interval: .seconds(30), windowBudget: .seconds(1)))
        let engine = try PollEngine(
            peripherals: [spec(0)], transport: transport, keepAlive: keepAlive, logger: quietLogger)
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            // The read has started (it sleeps until 5 s); let the 1-s window expire under it.
            try await clock.waitForSleeper(until: clock.instant(.seconds(5)))
            clock.advance(to: clock.instant(.seconds(1)))
            let record = try await records.next { _ in true }
            // Expired (the handler returned within the grace), not force-ended.
            #expect(record.window?.outcome == .expired)
            #expect(record.result == .failed)
            // The window ended while the disconnect was still running: its latency (bounded by the 4-s
            // disconnect timeout) sleeps until 1 + 4 s, after the window's end and after its grace.
            #expect(transport.calls.last?.operation == .disconnect)
            try await clock.waitForSleeper(until: clock.instant(.seconds(5)))
            clock.advance(to: clock.instant(.seconds(5)))
            await engine.waitUntilDisconnected()
            #expect(transport.connected.isEmpty)
        }
        #expect(keepAlive.statistics.forcedEnds == 0)
        expectAlwaysDisconnected(transport, [sensor(0)])
    }

    @Test func retriesTransientErrorsWithGrowingDelays() async throws {
        let transport = MockTransport(clock: clock)
        addSensors(transport, 0..<1)
        let aborted = TransportError(
            .connectionAborted, "le-connection-abort-by-local", dbusName: "org.bluez.Error.Failed")
        transport.script(.connect, on: sensor(0), .fail(times: 4, with: aborted))
        let keepAlive = try makeKeepAlive()
        let engine = try PollEngine(
            peripherals: [spec(0)], transport: transport, keepAlive: keepAlive, logger: quietLogger)
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            try await step(through: [100, 350, 850, 1_850])
            let record = try await records.next()
            #expect(record.result == .newData)
            #expect(record.attempts == 5)
            #expect(record.failure == nil)
        }
        let attempts = transport.calls(.connect, on: sensor(0)).map(\.at)
        #expect(attempts == [0, 100, 350, 850, 1_850].map { KeepAliveInstant.at(.milliseconds($0)) })
        expectAlwaysDisconnected(transport, [sensor(0)])
    }

    @Test func neverRetriesPermanentErrors() async throws {
        let transport = MockTransport(clock: clock)
        addSensors(transport, 0..<1)
        transport.script(
            .connect, on: sensor(0),
            .alwaysFail(TransportError(.doesNotExist, "Does Not Exist", dbusName: "org.bluez.Error.DoesNotExist")))
        let keepAlive = try makeKeepAlive()
        let engine = try PollEngine(
            peripherals: [spec(0)], transport: transport, keepAlive: keepAlive, logger: quietLogger)
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            let record = try await records.next()
            #expect(record.result == .failed)
            #expect(record.attempts == 1)
            #expect(record.failure?.code == "doesNotExist")
            #expect(record.failure?.dbusName == "org.bluez.Error.DoesNotExist")
        }
        #expect(transport.calls(.connect, on: sensor(0)).count == 1)
        expectAlwaysDisconnected(transport, [sensor(0)])
    }

    @Test func retriesStopWhenTheWindowHasNoRoomLeft() async throws {
        let transport = MockTransport(clock: clock)
        addSensors(transport, 0..<1)
        transport.script(
            .connect, on: sensor(0), .alwaysFail(TransportError(.inProgress, "Operation already in progress")))
        let keepAlive = try makeKeepAlive(.init(interval: .seconds(30), windowBudget: .seconds(3)))
        let engine = try PollEngine(
            peripherals: [spec(0)], transport: transport, keepAlive: keepAlive, logger: quietLogger)
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            // 3 s budget: retries at 0.1, 0.35, 0.85 and 1.85 s; the next (2 s later, +1 s minimum) would not fit.
            try await step(through: [100, 350, 850, 1_850])
            let record = try await records.next()
            #expect(record.attempts == 5)
            #expect(record.failure?.code == "inProgress")
            #expect(record.window?.outcome == .completed)
        }
        expectAlwaysDisconnected(transport, [sensor(0)])
    }

    @Test func disconnectsAfterExpiry() async throws {
        let transport = MockTransport(clock: clock)
        addSensors(transport, 0..<1)
        transport.script(.read(battery), on: sensor(0), .hang)
        let keepAlive = try makeKeepAlive(.init(interval: .seconds(30), windowBudget: .seconds(10)))
        let engine = try PollEngine(
            peripherals: [spec(0)], transport: transport, keepAlive: keepAlive, logger: quietLogger)
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            // The ledger sleeps until its warning (10 s / 3 before the deadline); the read hangs.
            try await clock.waitForSleeper(until: clock.instant(.seconds(10) - .seconds(10) / 3))
            while transport.calls(.read(battery), on: sensor(0)).isEmpty { await Task.yield() }
            clock.advance(to: clock.instant(.seconds(10)))
            let record = try await records.next()
            #expect(record.result == .failed)
            #expect(record.window?.outcome == .expired)
            #expect(record.failure?.code == "windowExpired")
        }
        expectAlwaysDisconnected(transport, [sensor(0)])
        #expect(transport.calls(.disconnect, on: sensor(0)).count == 1)
    }

    @Test func aConnectThatNeverCompletesGivesUpBeforeTheWindowAndSaysSo() async throws {
        let transport = MockTransport(clock: clock)
        addSensors(transport, 0..<1)
        transport.script(.connect, on: sensor(0), .hang)
        let keepAlive = try makeKeepAlive(.init(interval: .seconds(30), windowBudget: .seconds(10)))
        let engine = try PollEngine(
            peripherals: [spec(0)], transport: transport, keepAlive: keepAlive,
            configuration: .init(connectTimeout: .seconds(60)),
            logger: quietLogger)
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            // The transport's deadline: 10 s left, less a tenth of it capped at 250 ms: 9.75 s, inside the window.
            try await clock.waitForSleeper(until: clock.instant(.milliseconds(9_750)))
            clock.advance(to: clock.instant(.milliseconds(9_750)))
            let record = try await records.next()
            #expect(record.result == .failed)
            #expect(record.failure?.code == "timeout", "the transport's own error, not the window's expiry")
            #expect(record.window?.outcome == .completed)
        }
        expectAlwaysDisconnected(transport, [sensor(0)])
    }

    @Test func disconnectsAfterCancellationByStop() async throws {
        let transport = MockTransport(clock: clock)
        addSensors(transport, 0..<2)
        transport.script(.read(battery), on: sensor(0), .hang)
        transport.script(.read(battery), on: sensor(1), .hang)
        let keepAlive = try makeKeepAlive()
        let engine = try PollEngine(
            peripherals: [spec(0), spec(1)], transport: transport, keepAlive: keepAlive, logger: quietLogger)
        let records = Collector(engine.records())
        let run = Task { try await keepAlive.run() }
        while transport.calls.filter({ $0.operation == .read(battery) }).count < 2 { await Task.yield() }
        await keepAlive.stop()
        try await run.value
        for _ in 0..<2 {
            let record = try await records.next()
            #expect(record.window?.outcome == .cancelled)
            #expect(record.failure?.code == "cancelled")
        }
        expectAlwaysDisconnected(transport, [sensor(0), sensor(1)])
    }

    @Test func vanishingDeviceFailsInFlightOperationAtOnce() async throws {
        let transport = MockTransport(clock: clock)
        addSensors(transport, 0..<1)
        transport.script(.read(battery), on: sensor(0), .hang)
        let keepAlive = try makeKeepAlive(.init(interval: .seconds(30), windowBudget: .seconds(3)))
        let engine = try PollEngine(
            peripherals: [spec(0)], transport: transport, keepAlive: keepAlive, logger: quietLogger)
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            while transport.calls(.read(battery), on: sensor(0)).isEmpty { await Task.yield() }
            transport.vanish(sensor(0))
            // The hanging read fails at once (deviceVanished, transient); the retries at 0.1, 0.35, 0.85 and
            // 1.85 s find no device (deviceNotFound, transient) until the 3 s window has no room left.
            try await step(through: [100, 350, 850, 1_850])
            let record = try await records.next()
            #expect(record.result == .failed)
            #expect(record.attempts == 5)
            #expect(record.failure?.code == "deviceNotFound")
            #expect(record.window?.outcome == .completed)
        }
        expectAlwaysDisconnected(transport, [sensor(0)])
    }

    @Test func writesThenReadsThenListensAndReportsNewOrNoData() async throws {
        let transport = MockTransport(clock: clock)
        let peripheral = sensor(0)
        transport.add(
            peripheral,
            characteristics: [
                battery: .fixed([77]), temperature: .counter(every: .seconds(1)) { UInt8($0) }, control: .fixed([]),
            ])
        let keepAlive = try makeKeepAlive()
        let withNotify = PeripheralSpec(
            name: "full",
            peripheral: peripheral,
            writes: [.init(characteristic: control, value: [1, 2])],
            reads: [battery],
            notifications: [.init(characteristic: temperature, duration: .milliseconds(3_500))]
        )
        let engine = try PollEngine(
            peripherals: [withNotify], transport: transport, keepAlive: keepAlive, logger: quietLogger)
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            for second in 1...4 {  // notifications at 1, 2, 3 s; the listening ends at 3.5 s
                let instant = second == 4 ? clock.instant(.milliseconds(3_500)) : clock.instant(.seconds(second))
                try await clock.waitForSleeper(until: instant)
                clock.advance(to: instant)
            }
            let first = try await records.next()
            #expect(first.result == .newData)
            #expect(first.values == [PollRecord.Value(characteristic: battery, bytes: [77])])
            #expect(first.notifications.map(\.bytes) == [[0], [1], [2]])
            #expect(first.notifications.map(\.at) == [1, 2, 3].map { KeepAliveInstant.at(.seconds($0)) })
            #expect(transport.written(to: control, of: peripheral) == [[1, 2]])
            let order = transport.calls.map(\.operation)
            #expect(order.prefix(4) == [.connect, .write(control), .read(battery), .subscribe(temperature)])
        }
        expectAlwaysDisconnected(transport, [peripheral])

        // A device with reads only: unchanged values the second time → noData.
        let clock2 = TestClock()
        let transport2 = MockTransport(clock: clock2)
        transport2.add(peripheral, characteristics: [battery: .fixed([5])])
        let keepAlive2 = try KeepAlive(configuration: .init(interval: .seconds(30)), clock: clock2, logger: quietLogger)
        let engine2 = try PollEngine(
            peripherals: [PeripheralSpec(name: "r", peripheral: peripheral, reads: [battery])], transport: transport2,
            keepAlive: keepAlive2, logger: quietLogger)
        let records2 = Collector(engine2.records())
        try await withRunning(keepAlive2) {
            #expect(try await records2.next().result == .newData)
            try await clock2.waitForSleeper(until: clock2.instant(.seconds(30)))
            clock2.advance(to: clock2.instant(.seconds(30)))
            #expect(try await records2.next().result == .noData)
        }
    }

    @Test func unknownCharacteristicIsAPermanentFailure() async throws {
        let transport = MockTransport(clock: clock)
        transport.add(sensor(0), characteristics: [battery: .fixed([1])])
        let keepAlive = try makeKeepAlive()
        let engine = try PollEngine(
            peripherals: [PeripheralSpec(name: "x", peripheral: sensor(0), reads: [BluetoothUUID(assigned: 0xFFFF)])],
            transport: transport,
            keepAlive: keepAlive,
            logger: quietLogger
        )
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            let record = try await records.next()
            #expect(record.failure?.code == "characteristicNotFound")
            #expect(record.attempts == 1)
        }
        expectAlwaysDisconnected(transport, [sensor(0)])
    }
}

/// A transport whose calls must run on its own executor (as BlueZ's run on the D-Bus connection's thread):
/// it forwards to a `MockTransport` and records, per call, whether it ran there.
private final class ExecutorBoundTransport: PeripheralTransport {
    final class Executor: TaskExecutor {
        private let queue = DispatchQueue(label: "transport")
        private let key = DispatchSpecificKey<Bool>()

        init() { queue.setSpecific(key: key, value: true) }

        var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == true }

        func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            let executor = asUnownedTaskExecutor()
            queue.async { job.runSynchronously(on: executor) }
        }
    }

    let base: MockTransport
    let executor = Executor()
    /// (call, ran on `executor`)
    let calls = Locked<[(String, Bool)]>([])

    init(_ base: MockTransport) { self.base = base }

    var preferredExecutor: (any TaskExecutor)? { executor }

    private func note(_ call: String) {
        let onExecutor = executor.isCurrent
        calls.withLock { $0.append((call, onExecutor)) }
    }

    func discover(on adapter: String, filter: DiscoveryFilter) -> AsyncThrowingStream<Advertisement, any Error> {
        base.discover(on: adapter, filter: filter)
    }

    func connect(_ peripheral: Peripheral, options: ConnectOptions) async throws {
        note("connect")
        try await base.connect(peripheral, options: options)
    }

    func read(_ characteristic: BluetoothUUID, from peripheral: Peripheral) async throws -> [UInt8] {
        note("read")
        return try await base.read(characteristic, from: peripheral)
    }

    func write(_ value: [UInt8], to characteristic: BluetoothUUID, of peripheral: Peripheral, type: WriteType)
        async throws
    {
        note("write")
        try await base.write(value, to: characteristic, of: peripheral, type: type)
    }

    func notifications(from characteristic: BluetoothUUID, of peripheral: Peripheral) async throws
        -> AsyncThrowingStream<[UInt8], any Error>
    {
        note("notifications")
        return try await base.notifications(from: characteristic, of: peripheral)
    }

    func disconnect(_ peripheral: Peripheral, timeout: Duration) async {
        note("disconnect")
        await base.disconnect(peripheral, timeout: timeout)
    }
}

extension PollEngineTests {
    /// BlueZ's calls are cheapest on the D-Bus connection's thread (no thread switch per reply): the engine must
    /// run every transport call of a poll — the disconnect's own task included — on the transport's executor.
    @Test func pollsRunOnTheTransportsPreferredExecutor() async throws {
        let mock = MockTransport(clock: clock)
        addSensors(mock, 0..<3)
        // A failing poll must disconnect on the executor too.
        mock.script(.read(battery), on: sensor(1), .alwaysFail(TransportError(.notPermitted, "Read not permitted")))
        let transport = ExecutorBoundTransport(mock)
        let keepAlive = try makeKeepAlive()
        let specs = (0..<3).map {
            PeripheralSpec(
                name: "sensor-\($0)", peripheral: sensor($0), writes: [.init(characteristic: control, value: [1])],
                reads: [battery])
        }
        let engine = try PollEngine(peripherals: specs, transport: transport, keepAlive: keepAlive, logger: quietLogger)
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            for _ in 0..<3 { _ = try await records.next() }
        }
        let calls = transport.calls.withLock { $0 }
        for name in ["connect", "write", "read", "disconnect"] {
            #expect(calls.filter { $0.0 == name }.count == 3, "\(name): \(calls.filter { $0.0 == name }.count) calls")
        }
        #expect(records.all.filter { $0.result == .newData }.count == 2)
        let elsewhere = calls.filter { !$0.1 }.map(\.0)
        #expect(elsewhere.isEmpty, "transport calls not on its executor: \(elsewhere)")
    }
}

extension PollEngineTests {
    /// `recordsOnTransportExecutor` moves `onRecord` to the thread the poll ended on (a record written to a file
    /// then costs no task and no thread switch); without it, `onRecord` never runs there, so a record output that
    /// blocks (a pipe nobody reads) cannot stall the transport's thread.
    @Test(arguments: [true, false])
    func onRecordRunsOnTheTransportsExecutorOnlyWhenAskedTo(inPlace: Bool) async throws {
        let mock = MockTransport(clock: clock)
        addSensors(mock, 0..<3)
        mock.script(.read(battery), on: sensor(1), .alwaysFail(TransportError(.notPermitted, "Read not permitted")))
        let transport = ExecutorBoundTransport(mock)
        let keepAlive = try makeKeepAlive()
        let specs = (0..<3).map { PeripheralSpec(name: "sensor-\($0)", peripheral: sensor($0), reads: [battery]) }
        let placesOfRecords = Locked<[(String, Bool)]>([])
        let engine = try PollEngine(
            peripherals: specs, transport: transport, keepAlive: keepAlive,
            configuration: PollEngine.Configuration(recordsOnTransportExecutor: inPlace), logger: quietLogger,
            onRecord: { record in
                let onExecutor = transport.executor.isCurrent
                placesOfRecords.withLock { $0.append((record.device, onExecutor)) }
            }
        )
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            for _ in 0..<3 { _ = try await records.next() }
        }
        let places = placesOfRecords.withLock { $0 }
        #expect(places.count == 3)
        #expect(Set(places.map(\.0)) == ["sensor-0", "sensor-1", "sensor-2"])
        let misplaced = places.filter { $0.1 != inPlace }.map(\.0)
        #expect(misplaced.isEmpty, "records \(inPlace ? "not on" : "on") the transport's executor: \(misplaced)")
    }
}
