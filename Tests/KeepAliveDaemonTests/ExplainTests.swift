import Basics
import KeepAlive
import Polling
import Testing

@testable import KeepAliveDaemon

#if canImport(Glibc)
    import Glibc
#endif

/// "Why was it not polled?" (issue #37): every reason a tick can be skipped or fail, fed to the device board as
/// the daemon feeds it (records in `seq` order, declined ticks from the admission), and read back in words. The
/// scheduler's clock and the wall clock are fixed: 12:00:00 UTC is t+1000s.
@Suite("keepalive explain: every reason in words")
struct ExplainTests {
    static let noon: Int64 = 1_795_003_200_000  // 2026-11-18T12:00:00Z
    static let now = KeepAliveInstant(offset: .seconds(1000))

    let schedule = Locked<KeepAlive.RegistrationStatus?>(nil)
    let unhealthy = Locked<[String: String]>([:])
    let board: DeviceBoard

    init() {
        let devices = [
            DeviceBoard.Device(
                name: "sensor-1", address: "C0:FF:EE:00:00:01", adapter: "hci0", passive: false, listened: false,
                interval: .seconds(30)),
            DeviceBoard.Device(
                name: "gated", address: "C0:FF:EE:00:00:02", adapter: "hci0", passive: false, listened: true,
                interval: .seconds(30)),
            DeviceBoard.Device(
                name: "porch", address: "C0:FF:EE:02:00:01", adapter: "hci0", passive: true, listened: true,
                interval: .seconds(30)),
        ]
        let unhealthy = self.unhealthy
        board = DeviceBoard(
            devices: devices, clock: { Self.now }, wallNow: { Self.noon },
            unhealthyAdapters: { unhealthy.withLock { $0 } })
        let schedule = self.schedule
        board.follow { name in
            schedule.withLock {
                $0.map {
                    var copy = $0
                    copy.name = name
                    return copy
                }
            }
        }
    }

    /// `HH:MM:SS` in UTC, so the texts do not depend on the machine's zone.
    static func utc(_ milliseconds: Int64) -> String {
        ControlInterface.timestamp(milliseconds).dropFirst(11).prefix(8).description
    }

    /// t+`seconds` as the scheduler's instant.
    static func at(_ seconds: Int64) -> KeepAliveInstant { KeepAliveInstant(offset: .seconds(seconds)) }

    func record(
        _ device: String = "sensor-1", at seconds: Int64 = 1000, result: PollRecord.Result = .noData,
        code: String? = nil, skip: TickReport.SkipReason? = nil, power: PowerState = .normal,
        interval: Duration = .seconds(30), slotWait: Duration? = nil, trigger: PollRecord.Trigger = .schedule
    ) -> PollRecord {
        var record = PollRecord(
            device: device, peripheral: Peripheral(address: "C0:FF:EE:00:00:01", adapter: "hci0"), tick: 1,
            scheduled: Self.at(seconds), fired: Self.at(seconds), result: code == nil ? result : .failed,
            failure: code.map { PollRecord.Failure(code: $0, message: "test", transient: true) },
            window: skip == nil
                ? PollRecord.Window(id: .invalid, budget: .seconds(10), used: .milliseconds(1200), outcome: .completed)
                : nil,
            attempts: code == nil ? 1 : 3, interval: interval, power: power, trigger: trigger)
        record.skipReason = skip
        record.slotWait = slotWait
        return record
    }

    func feed(_ record: PollRecord, healing: HealingStep? = nil) throws {
        try board.accept(SequencedRecord(record: record, sequence: 0, line: "{}", healing: healing))
    }

    func explain(_ device: String = "sensor-1", stopped: Bool = false) throws -> Explanation {
        let (state, decisions, strings) = try #require(board.snapshot(of: device))
        return Explanation(
            device: try #require(board.device(named: device)), state: state, decisions: decisions, strings: strings,
            context: Explanation.Context(
                schedule: schedule.withLock { $0 }, configuredInterval: .seconds(30),
                unhealthyAdapters: unhealthy.withLock { $0 }, schedulerStopped: stopped,
                wallTime: { [board] in board.wallTime(of: $0) }, clockText: Self.utc))
    }

    func status(
        next: Int64? = 1030, interval: Duration = .seconds(30), effective: Duration? = .seconds(30),
        power: PowerState = .normal, failures: Int = 0, backoffUntil: Int64? = nil
    ) {
        schedule.withLock {
            $0 = KeepAlive.RegistrationStatus(
                name: "", interval: interval, effectiveInterval: effective, power: power,
                nextFire: next.map(Self.at), consecutiveFailures: failures, backoffUntil: backoffUntil.map(Self.at))
        }
    }

    @Test func backingOffSaysAfterHowManyFailuresOfWhatAndWhenTheNextTryIs() throws {
        for second in 0..<4 { try feed(record(at: 880 + Int64(second) * 30, code: "connectionAborted")) }
        status(failures: 4, backoffUntil: 1240)
        try feed(record(skip: .backoff))
        let explanation = try explain()
        #expect(explanation.entries.count == 2)
        #expect(explanation.entries[0].text == "11:58:00–11:59:30 (4×) failed: connectionAborted after 3 attempts")
        #expect(
            explanation.entries[1].text
                == "12:00:00 not polled: backing off after 4 failures (connectionAborted)")
        #expect(explanation.now.contains("backing off after 4 failures (connectionAborted): next try 12:04:00"))
        #expect(!explanation.now.contains { $0.hasPrefix("next poll") }, "the next try is the next poll")
        #expect(
            ControlInterface.state(
                try #require(board.snapshot(of: "sensor-1")).state,
                schedule: schedule.withLock { $0 }, last: nil) == "backing off")
    }

    @Test func anOverlapSaysThePreviousPollWasStillRunning() throws {
        try feed(record(skip: .overlap))
        #expect(
            try explain().entries.last?.text
                == "12:00:00 not polled: its previous poll was still running (ticks never stack)")
    }

    @Test func lowPowerSaysTheIntervalWasStretched() throws {
        status(interval: .seconds(30), effective: .seconds(60), power: .lowPower)
        try feed(record(power: .lowPower, interval: .seconds(60)))
        let explanation = try explain()
        #expect(
            explanation.entries.last?.text
                == "12:00:00 polled: nothing new, window used 1.2s — host in low power, interval stretched to 1m")
        #expect(explanation.now.last == "next poll at 12:00:30 (every 1m: host in low power, 30s stretched)")
        #expect(
            Explanation.intervalReason(try #require(schedule.withLock { $0 }), configured: .seconds(30)) == "low power")
    }

    @Test func aCriticalBatteryPauseIsSaidAsTheStateNow() throws {
        try feed(record(at: 970))
        status(next: nil, effective: nil, power: .critical)
        let explanation = try explain()
        #expect(
            explanation.now.contains(
                "polling paused: the host's battery is critical (low_power: critical pauses polling)"))
        #expect(!explanation.now.contains { $0.hasPrefix("next poll") })
        #expect(
            ControlInterface.state(
                try #require(board.snapshot(of: "sensor-1")).state,
                schedule: schedule.withLock { $0 }, last: nil) == "critical pause")
    }

    @Test func aDeviceAnotherGatewayHoldsSaysWhoAndSince() throws {
        status()
        for _ in 0..<3 { board.declined("sensor-1", paused: false, holder: "south-pi") }
        let explanation = try explain()
        #expect(explanation.entries.count == 1)
        #expect(
            explanation.entries[0].text
                == "12:00:00–12:00:00 (3×) not polled: held by south-pi (fleet lease), that gateway polls it")
        #expect(explanation.now.contains("held by south-pi since 12:00:00: that gateway polls it"))
    }

    @Test func aHandoverIsSaidOnTheFirstPollAfterIt() throws {
        var taken = record(result: .newData)
        taken.holder = PollRecord.Holder(
            gateway: "south-pi", adapter: "hci0", handover: .init(from: "north-pi", reason: "expired"))
        try feed(taken)
        #expect(
            try explain().entries.last?.text
                == "12:00:00 polled: new data, window used 1.2s — took the device over (from north-pi, expired)")
    }

    @Test func noSlotSaysHowLongItWaitedOnWhichAdapter() throws {
        try feed(record(code: "noSlot", slotWait: .milliseconds(9800)))
        #expect(
            try explain().entries.last?.text
                == "12:00:00 not polled: no connection slot free on hci0 for 9.8s (other devices held them all)")
    }

    /// A tick that gave up while a deferred task held the device's link says what held it, not a slot wait of 0 s.
    @Test func noSlotWhileAHistoryDownloadHeldTheLinkSaysSo() throws {
        var busy = record(code: "noSlot")
        busy.busy = "history download"
        try feed(busy)
        let entry = try #require(try explain().entries.last)
        #expect(
            entry.text
                == "12:00:00 not polled: the device was busy, its link held by history download (not a failure of "
                + "the device)")
        #expect(entry.kind == "noSlot")
    }

    @Test func notHeardIsSaidForAGatedPollAndForAPassiveSensor() throws {
        try feed(record("gated", code: "notHeard"))
        #expect(
            try explain("gated").entries.last?.text
                == "12:00:00 not polled: not heard advertising (poll_when: heard), no Connect sent")
        try feed(record("porch", code: "notHeard"))
        #expect(try explain("porch").entries.last?.text == "12:00:00 not heard: no advertisement in its interval")
        try feed(record("porch", at: 1001, result: .newData))
        #expect(try explain("porch").entries.last?.text == "12:00:01 heard: new data")
    }

    @Test func anUnhealthyAdapterAndItsHealingAreSaid() throws {
        unhealthy.withLock { $0 = ["hci0": "every poll failed for 4 rounds"] }
        let step = HealingStep(adapter: "hci0", action: .powerCycle, why: "3 rounds failed", at: Self.at(995))
        try feed(record(code: "connectionAborted"), healing: step)
        let explanation = try explain()
        #expect(
            explanation.entries.map(\.text) == [
                "11:59:55 adapter hci0: healing step powerCycle",
                "12:00:00 failed: connectionAborted after 3 attempts; adapter hci0 was unhealthy "
                    + "(the healing ladder had given up on it)",
            ])
        #expect(explanation.now.contains("its adapter hci0 is unhealthy: every poll failed for 4 rounds"))
    }

    @Test func shuttingDownIsSaidForAClosedLedgerAndAStoppedScheduler() throws {
        try feed(record(skip: .refused))
        let explanation = try explain(stopped: true)
        #expect(
            explanation.entries.last?.text
                == "12:00:00 not polled: the daemon was shutting down or the host going to sleep "
                + "(the ledger was closed)")
        #expect(explanation.now.contains("not polling: the scheduler is not running (starting, or shutting down)"))
    }

    @Test func aPausedDeviceSaysByWhomUntilResumed() throws {
        status()
        #expect(board.pause("sensor-1"))
        #expect(!board.pause("sensor-1"))
        let admission = ControlAdmission(board: board, fleet: nil)
        #expect(admission.admit("sensor-1") == .paused)
        #expect(!admission.records("sensor-1"))
        #expect(admission.admit("gated") == .poll(nil))
        let explanation = try explain()
        #expect(explanation.entries.last?.text == "12:00:00 not polled: paused by its operator")
        #expect(
            explanation.now.first
                == "paused by its operator since 12:00:00: not polled until `keepalive resume sensor-1`")
        #expect(!explanation.now.contains { $0.hasPrefix("next poll") })
        #expect(board.resume("sensor-1"))
        #expect(admission.admit("sensor-1") == .poll(nil))
    }

    @Test func aCommandPollAndACommandIntervalAreSaid() throws {
        status(interval: .seconds(120), effective: .seconds(120))
        try feed(record(result: .newData, trigger: .command))
        let explanation = try explain()
        #expect(explanation.entries.last?.text == "12:00:00 polled on command: new data, window used 1.2s")
        #expect(explanation.now.last == "next poll at 12:00:30 (every 2m: set by command, 30s configured)")
    }

    @Test func likeDecisionsFoldIntoOneRunAndTheLogKeepsTheNewestTwenty() throws {
        for second in 0..<100 { try feed(record(at: Int64(second))) }
        #expect(try explain().entries.count == 1)
        #expect(try explain().entries[0].count == 100)
        for second in 100..<200 {
            try feed(record(at: Int64(second), code: second % 2 == 0 ? "connectionAborted" : nil))
        }
        let entries = try explain().entries
        #expect(entries.count == DecisionLog.capacity)
        #expect(entries.last?.first == board.wallTime(of: Self.at(199)))
        #expect(zip(entries, entries.dropFirst()).allSatisfy { $0.first < $1.first })
    }

    /// The board's memory at 10,000 devices, each with a full log (the worst case: no two decisions alike), from
    /// the allocator's own count: alone in a process (`make test` runs it first, with `KEEPALIVE_MEMORY_TESTS=1`),
    /// since other tests allocating meanwhile would move the count.
    @Test(.enabled(if: getenv("KEEPALIVE_MEMORY_TESTS").map { String(cString: $0) } == "1", "runs alone: make test"))
    func tenThousandDevicesWithFullLogsCostUnderOnePointFiveKilobytesEach() throws {
        let count = 10_000
        let devices = (0..<count).map { index in
            DeviceBoard.Device(
                name: "sensor-\(index)", address: "C0:FF:EE:00:00:01", adapter: "hci0", passive: false,
                listened: false, interval: .seconds(30))
        }
        let before = HeapUsage.bytesInUse
        let board = DeviceBoard(devices: devices, clock: { Self.now }, wallNow: { Self.noon })
        for round in 0..<DecisionLog.capacity {
            for index in 0..<count {
                var record = record("sensor-\(index)", at: Int64(round), code: round % 2 == 0 ? "timeout" : nil)
                record.readings = [.init(name: "battery", value: .unsigned(UInt64(round)), unit: "%")]
                try board.accept(SequencedRecord(record: record, sequence: UInt64(round), line: "{}"))
            }
        }
        let perDevice = (HeapUsage.bytesInUse - before) / count
        #expect(MemoryLayout<Decision>.stride == 48)
        print("explain: \(perDevice) bytes per device with a full log (\(DecisionLog.capacity) runs)")
        #expect(perDevice < 1536)
        withExtendedLifetime(board) {}

        // A steady fleet (every poll fine): one run each.
        let steadyBefore = HeapUsage.bytesInUse
        let steady = DeviceBoard(devices: devices, clock: { Self.now }, wallNow: { Self.noon })
        for round in 0..<DecisionLog.capacity {
            for index in 0..<count {
                var record = record("sensor-\(index)", at: Int64(round))
                record.readings = [.init(name: "battery", value: .unsigned(UInt64(round)), unit: "%")]
                try steady.accept(SequencedRecord(record: record, sequence: UInt64(round), line: "{}"))
            }
        }
        let steadyPerDevice = (HeapUsage.bytesInUse - steadyBefore) / count
        print("explain: \(steadyPerDevice) bytes per device when every poll is fine (one run)")
        #expect(steadyPerDevice < 512)
        withExtendedLifetime(steady) {}
    }
}
