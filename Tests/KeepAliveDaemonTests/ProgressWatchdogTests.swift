import KeepAlive
import KeepAliveDaemon
import Testing

/// The watchdog pings only while the scheduler keeps up: a manual sequence of liveness snapshots, no clock.
@Suite("Progress watchdog")
struct ProgressWatchdogTests {
    func liveness(now seconds: Int64, owed: Int64?, running: Bool = true) -> KeepAlive.Liveness {
        KeepAlive.Liveness(
            now: KeepAliveInstant(offset: .seconds(seconds)), isRunning: running,
            earliestOwed: owed.map { KeepAliveInstant(offset: .seconds($0)) }, ticksFired: 0, openWindows: 0)
    }

    @Test func anIdleSchedulerIsAliveForAsLongAsItsIntervalLasts() {
        var watchdog = ProgressWatchdog(tolerance: .seconds(30))
        // A 30-min interval: nothing is owed for 30 min, and every ping goes out.
        for now in stride(from: Int64(0), through: 1_799, by: 30) {
            let decision = watchdog.check(liveness(now: now, owed: 1_800))
            #expect(decision.ping && decision.change == nil && decision.lateness == .zero)
        }
    }

    @Test func pingsStopOnceTheSchedulerIsLaterThanTheToleranceAndResumeWhenItCatchesUp() {
        var watchdog = ProgressWatchdog(tolerance: .seconds(30))
        // Late but within the tolerance (a loaded machine): still alive.
        var decision = watchdog.check(liveness(now: 1_830, owed: 1_800))
        #expect(decision.ping && decision.change == nil && decision.lateness == .seconds(30))
        // The tick owed at 1800 s has not fired 31 s later: stalled, once.
        decision = watchdog.check(liveness(now: 1_831, owed: 1_800))
        #expect(!decision.ping && decision.change == .stalled && decision.lateness == .seconds(31))
        #expect(watchdog.isStalled)
        decision = watchdog.check(liveness(now: 1_900, owed: 1_800))
        #expect(!decision.ping && decision.change == nil)
        // It fired: the next thing owed is in the future again.
        decision = watchdog.check(liveness(now: 1_901, owed: 3_600))
        #expect(decision.ping && decision.change == .recovered)
        #expect(!watchdog.isStalled)
    }

    @Test func aCheckAfterTheWatchdogItselfWasFrozenGivesTheSchedulerUntilTheNextCheck() {
        var watchdog = ProgressWatchdog(tolerance: .seconds(30))
        #expect(watchdog.check(liveness(now: 0, owed: 30)).ping)
        // The host slept an hour: the tick owed at 30 s is an hour late, but the watchdog was asleep too.
        let resumed = watchdog.check(liveness(now: 3_630, owed: 30))
        #expect(resumed.ping && resumed.change == nil && !watchdog.isStalled)
        // The scheduler caught up by the next check: alive.
        #expect(watchdog.check(liveness(now: 3_660, owed: 3_690)).ping)
        // Had it not, the next check says so.
        var stuck = ProgressWatchdog(tolerance: .seconds(30))
        _ = stuck.check(liveness(now: 0, owed: 30))
        _ = stuck.check(liveness(now: 3_630, owed: 30))
        #expect(stuck.check(liveness(now: 3_660, owed: 30)).change == .stalled)
    }

    @Test func nothingOwedOrNotRunningIsNeverAStall() {
        var watchdog = ProgressWatchdog(tolerance: .seconds(2))
        // Paused (critical battery): nothing owed.
        #expect(watchdog.check(liveness(now: 10_000, owed: nil)).ping)
        // Before run() (waiting for bluetoothd) or after it returned: whatever the schedule says.
        #expect(watchdog.check(liveness(now: 10_000, owed: 0, running: false)).ping)
        #expect(!watchdog.isStalled)
    }

    @Test func theToleranceIsOnePingIntervalAndAtLeastTwoSeconds() {
        #expect(ProgressWatchdog.tolerance(forPingInterval: .seconds(30)) == .seconds(30))
        #expect(ProgressWatchdog.tolerance(forPingInterval: .milliseconds(500)) == .seconds(2))
    }

    @Test func statusPutsProblemsFirst() {
        var status = DaemonStatus(polling: "polling 2 devices every 30s")
        #expect(status.text == "polling 2 devices every 30s" && status.isHealthy)
        status.stalledBy = .seconds(42)
        status.unhealthyAdapters["hci1"] = "power-cycled 3 times in 1h, still failing"
        #expect(!status.isHealthy)
        #expect(
            status.text
                == """
                    stalled: the scheduler is 42s behind, watchdog pings withheld; hci1 unhealthy: power-cycled 3 \
                    times in 1h, still failing — polling 2 devices every 30s
                    """
        )
    }
}
