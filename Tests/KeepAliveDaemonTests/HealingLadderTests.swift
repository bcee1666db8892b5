import KeepAlive
import KeepAliveDaemon
import Testing

/// The adapter health model and the healing ladder (issue #15), as pure state machines on a virtual clock:
/// signals and instants in, steps out; a simulated day takes milliseconds.
@Suite("Adapter health and the healing ladder")
struct HealingLadderTests {
    static let devices: Set<String> = ["sensor-1", "sensor-2"]

    func at(_ seconds: Int64) -> KeepAliveInstant { KeepAliveInstant(offset: .seconds(seconds)) }

    /// Feeds one round (every device reports `signal`) at `seconds`; returns the steps.
    func round(_ ladder: inout HealingLadder, _ signal: AdapterSignal, at seconds: Int64) -> [HealingStep] {
        Self.devices.sorted().flatMap { ladder.observe(device: $0, signal, at: at(seconds)) }
    }

    // MARK: Signals and rounds

    @Test func recordsAreClassifiedByWhatTheySayAboutTheAdapter() {
        #expect(AdapterSignal(result: .newData, failureCode: nil, message: nil) == .healthy)
        #expect(AdapterSignal(result: .noData, failureCode: nil, message: nil) == .healthy)
        for code in ["connectionAborted", "inProgress", "timeout", "ioError", "windowExpired", "notConnected"] {
            #expect(AdapterSignal(result: .failed, failureCode: code, message: "") == .linkFailure(code: code))
        }
        #expect(
            AdapterSignal(result: .failed, failureCode: "adapterUnavailable", message: "adapter hci0 is powered off")
                == .poweredOff)
        #expect(
            AdapterSignal(
                result: .failed, failureCode: "adapterUnavailable",
                message: "adapter hci0 is rfkill-blocked (PowerState off-blocked)")
                == .rfkillBlocked)
        #expect(AdapterSignal(result: .failed, failureCode: "adapterNotFound", message: "") == .adapterGone)
        #expect(AdapterSignal(result: .failed, failureCode: "serviceUnavailable", message: "") == .bluetoothdDown)
        #expect(AdapterSignal(result: .failed, failureCode: "deviceNotFound", message: "") == .notFound)
        #expect(AdapterSignal(result: .failed, failureCode: "attError", message: "") == .deviceFailure)
        #expect(AdapterSignal(result: .failed, failureCode: "skipped", message: "") == .neutral)
        // A poll that found no free connection slot: the other devices held them, the adapter carried them.
        #expect(AdapterSignal(result: .failed, failureCode: "noSlot", message: "") == .neutral)
    }

    @Test func aRoundEndsWhenEveryDeviceHasReportedAndOneWorkingDeviceMakesItHealthy() {
        var health = AdapterHealth(adapter: "hci0", devices: Self.devices)
        #expect(health.observe(device: "sensor-1", .linkFailure(code: "timeout")) == nil)
        // A device that reports twice first: its newest signal counts.
        #expect(health.observe(device: "sensor-1", .linkFailure(code: "connectionAborted")) == nil)
        #expect(
            health.observe(device: "sensor-2", .linkFailure(code: "connectionAborted"))
                == .failing(signals: ["connectionAborted": 2]))
        #expect(health.consecutiveFailingRounds == 1)
        #expect(health.observe(device: "sensor-1", .linkFailure(code: "timeout")) == nil)
        #expect(health.observe(device: "sensor-2", .healthy) == .healthy)
        #expect(health.consecutiveFailingRounds == 0)
        // A device's own failure (an ATT error) means the adapter carried the request.
        #expect(health.observe(device: "sensor-1", .linkFailure(code: "timeout")) == nil)
        #expect(health.observe(device: "sensor-2", .deviceFailure) == .healthy)
        // Only skipped ticks: nothing to judge.
        #expect(health.observe(device: "sensor-1", .neutral) == nil)
        #expect(health.observe(device: "sensor-2", .neutral) == .silent)
        #expect(health.observe(device: "unknown", .healthy) == nil)
    }

    // MARK: The ladder

    @Test func anAdapterWedgedUntilPowerCycledClimbsToThePowerCycleAndNoFurther() {
        var ladder = HealingLadder(adapters: ["hci0": Self.devices], policy: HealingPolicy(restartBluetoothd: true))
        let wedged = AdapterSignal.linkFailure(code: "connectionAborted")
        var steps: [HealingStep] = []
        var now: Int64 = 0
        // Ticks every 30 s; the adapter recovers once power-cycled.
        while steps.last?.action != .powerCycle, now < 3_600 {
            steps += round(&ladder, wedged, at: now)
            now += 30
        }
        #expect(steps.map(\.action) == [.clearStuck, .powerCycle])
        // Three failing rounds (0, 30, 60 s); the one inside the 60-s cooldown (90 s) does not count; three more
        // (120, 150, 180 s).
        #expect(steps.map(\.at) == [at(60), at(180)])
        #expect(steps[0].why.contains("3 failing rounds in a row (connectionAborted ×2)"), "\(steps[0].why)")
        #expect(ladder.rung(of: "hci0") == .powerCycled)
        let recovered = round(&ladder, .healthy, at: now)
        #expect(recovered.map(\.action) == [.reportRecovered])
        #expect(recovered.first?.why == "first healthy round after a power-cycle")
        #expect(recovered.first?.at == at(now))
        #expect(ladder.rung(of: "hci0") == .watching)
        #expect(ladder.unhealthy.isEmpty)
    }

    @Test func aHealthyRoundResetsTheLadderSoTheNextFaultStartsFromTheBottom() {
        var ladder = HealingLadder(adapters: ["hci0": Self.devices], policy: HealingPolicy())
        var actions: [HealingStep.Action] = []
        for index in 0..<3 {
            actions += round(&ladder, .linkFailure(code: "timeout"), at: Int64(index) * 30).map(\.action)
        }
        #expect(actions == [.clearStuck])
        actions = round(&ladder, .healthy, at: 120).map(\.action)
        #expect(actions == [.reportRecovered])
        actions = []
        for index in 0..<3 {
            actions += round(&ladder, .linkFailure(code: "timeout"), at: 150 + Int64(index) * 30).map(\.action)
        }
        #expect(actions == [.clearStuck])
    }

    @Test func withoutARestartTheLadderEndsUnhealthyAndSaysWhy() {
        var ladder = HealingLadder(adapters: ["hci0": Self.devices], policy: HealingPolicy())
        var steps: [HealingStep] = []
        for index in Int64(0)..<40 { steps += round(&ladder, .linkFailure(code: "inProgress"), at: index * 30) }
        #expect(steps.map(\.action) == [.clearStuck, .powerCycle, .reportUnhealthy])
        #expect(ladder.unhealthy["hci0"]?.contains("every rung tried") == true)
        #expect(ladder.rung(of: "hci0") == .unhealthy)
        #expect(round(&ladder, .healthy, at: 1_230).map(\.action) == [.reportRecovered])
        #expect(ladder.unhealthy.isEmpty)
    }

    @Test func anAdapterPoweredOffBehindOurBackIsPoweredOnAtOnceWhenConfigured() {
        var ladder = HealingLadder(adapters: ["hci0": Self.devices], policy: HealingPolicy(powerOn: true))
        let steps = ladder.observe(device: "sensor-1", .poweredOff, at: at(0))
        #expect(steps.map(\.action) == [.powerOn])
        #expect(steps.first?.why == "sensor-1: the adapter is powered off and adapter_power is on")
        // sensor-2's record from the same tick (still off) changes nothing: the cooldown.
        #expect(ladder.observe(device: "sensor-2", .poweredOff, at: at(0)).isEmpty)
        #expect(round(&ladder, .healthy, at: 30).map(\.action) == [.reportRecovered])
    }

    @Test func anAdapterPoweredOffIsReportedNotTouchedWhenPowerIsNotOurs() {
        var ladder = HealingLadder(adapters: ["hci0": Self.devices], policy: HealingPolicy())
        var steps: [HealingStep] = []
        for index in Int64(0)..<3 { steps += round(&ladder, .poweredOff, at: index * 30) }
        #expect(steps.map(\.action) == [.reportUnhealthy])
        #expect(steps.first?.why.contains("`adapter_power: on` would power it on") == true)
    }

    @Test func rfkillAndAGoneAdapterSkipEveryRungThatCannotHelp() {
        var blocked = HealingLadder(
            adapters: ["hci0": Self.devices], policy: HealingPolicy(restartBluetoothd: true, powerOn: true))
        var steps: [HealingStep] = []
        for index in Int64(0)..<3 { steps += round(&blocked, .rfkillBlocked, at: index * 30) }
        #expect(steps.map(\.action) == [.reportUnhealthy])
        #expect(steps.first?.why.contains("rfkill unblock") == true)
        var gone = HealingLadder(adapters: ["hci0": Self.devices], policy: HealingPolicy(restartBluetoothd: true))
        steps = []
        for index in Int64(0)..<3 { steps += round(&gone, .adapterGone, at: index * 30) }
        #expect(steps.map(\.action) == [.reportUnhealthy])
    }

    @Test func bluetoothdDownIsRestartedOnlyWhenAllowedAndAtMostOnceAnHour() {
        var ladder = HealingLadder(adapters: ["hci0": Self.devices], policy: HealingPolicy(restartBluetoothd: true))
        var steps: [HealingStep] = []
        for index in Int64(0)..<20 { steps += round(&ladder, .bluetoothdDown, at: index * 30) }
        #expect(steps.map(\.action) == [.restartBluetoothd, .reportUnhealthy])
        var off = HealingLadder(adapters: ["hci0": Self.devices], policy: HealingPolicy())
        steps = []
        for index in Int64(0)..<20 { steps += round(&off, .bluetoothdDown, at: index * 30) }
        #expect(steps.map(\.action) == [.reportUnhealthy])
        #expect(steps.first?.why.contains("healing.restart_bluetoothd is off") == true)
    }

    @Test func adaptersClimbTheirOwnLadders() {
        var ladder = HealingLadder(adapters: ["hci0": ["a"], "hci1": ["b"]], policy: HealingPolicy())
        var steps: [HealingStep] = []
        for index in Int64(0)..<3 {
            steps += ladder.observe(device: "a", .linkFailure(code: "timeout"), at: at(index * 30))
            steps += ladder.observe(device: "b", .healthy, at: at(index * 30))
        }
        #expect(steps.map(\.adapter) == ["hci0"])
        #expect(ladder.rung(of: "hci1") == .watching)
    }

    // MARK: A simulated day

    /// Power changes inside any hour, for each step that changed the power.
    func mostPowerChangesInAnHour(_ steps: [HealingStep]) -> Int {
        let power = steps.filter { $0.action == .powerCycle || $0.action == .powerOn }.map(\.at)
        return power.map { end in power.filter { $0 <= end && $0.duration(to: end) < .seconds(3_600) }.count }.max()
            ?? 0
    }

    @Test func overADayOfAWedgedAdapterThePowerCycleBoundHoldsAndTheLadderKeepsTrying() {
        var ladder = HealingLadder(adapters: ["hci0": Self.devices], policy: HealingPolicy(restartBluetoothd: true))
        var steps: [HealingStep] = []
        for tick in Int64(0)..<(86_400 / 30) {
            steps += round(&ladder, .linkFailure(code: "connectionAborted"), at: tick * 30)
        }
        #expect(mostPowerChangesInAnHour(steps) <= 3)
        let cycles = steps.filter { $0.action == .powerCycle }.count
        let restarts = steps.filter { $0.action == .restartBluetoothd }.map(\.at)
        // Given up on, the ladder starts over an hour later: about once an hour, never more.
        #expect(cycles >= 20 && cycles <= 24, "\(cycles) power-cycles in a day")
        #expect(zip(restarts, restarts.dropFirst()).allSatisfy { $0.duration(to: $1) >= .seconds(3_600) })
        #expect(steps.filter { $0.action == .reportUnhealthy }.count == cycles)
    }

    @Test func evenAnEagerLadderNeverPowerCyclesMoreThanTheBoundInAnyHour() {
        // No cooldown, one failing round, retry at once: only the hourly bound stands between this and a loop.
        let policy = HealingPolicy(failingRounds: 1, cooldown: .zero, maxPowerCyclesPerHour: 3, retryAfter: .zero)
        var ladder = HealingLadder(adapters: ["hci0": Self.devices], policy: policy)
        var steps: [HealingStep] = []
        for tick in Int64(0)..<(86_400 / 10) { steps += round(&ladder, .linkFailure(code: "timeout"), at: tick * 10) }
        #expect(mostPowerChangesInAnHour(steps) == 3)
        #expect(steps.filter { $0.action == .powerCycle }.count == 72)
        #expect(steps.contains { $0.why.contains("power-cycle skipped: 3 power changes in the last hour already") })
        // A power-on counts against the same bound.
        var off = HealingLadder(adapters: ["hci0": Self.devices], policy: HealingPolicy(cooldown: .zero, powerOn: true))
        steps = []
        for tick in Int64(0)..<360 { steps += off.observe(device: "sensor-1", .poweredOff, at: at(tick * 10)) }
        #expect(steps.filter { $0.action == .powerOn }.count == 3)
    }
}
