import LocalServices
import TestHarness
import HostPower
import KeepAlive
import KeepAliveTesting
import Logging
import Testing

/// A logger whose lines go nowhere but a test's memory.
func quietLogger() -> Logger {
    CapturingLogHandler.logger().0
}

@Suite struct ManualPowerSourceTests {
    @Test func nilMeansNoOverrideAndReadsAsNormal() async throws {
        let manual = ManualPowerSource()
        #expect(manual.override == nil)
        #expect(manual.state == .normal)
        let updates = PowerUpdates(manual.updates())
        manual.set(.critical)
        #expect(manual.override == .critical)
        #expect(manual.state == .critical)
        manual.set(nil)
        #expect(manual.override == nil)
        #expect(try await updates.waitFor(count: 2) == [.critical, .normal])
    }

    @Test func overrideChangesTellNilFromNormal() async throws {
        let manual = ManualPowerSource(.normal)
        let stream = manual.overrideChanges()
        manual.set(nil)
        manual.set(.lowPower)
        manual.set(.lowPower)  // no change, no element
        manual.set(nil)
        let received = try await withTimeout("three override changes") {
            var received: [PowerState?] = []
            for await change in stream {
                received.append(change)
                if received.count == 3 { break }
            }
            return received
        }
        #expect(received == [nil, .lowPower, nil])
    }
}

@Suite struct CombinedPowerSourceTests {
    @Test func theMostSevereStateWins() {
        let first = MockPowerSource(.normal)
        let second = MockPowerSource(.lowPower)
        let combined = CombinedPowerSource([first, second], logger: quietLogger())
        #expect(combined.state == .lowPower)
        first.set(.critical)
        #expect(combined.state == .critical)
        first.set(.normal)
        second.set(.normal)
        #expect(combined.state == .normal)
        #expect(CombinedPowerSource([], logger: quietLogger()).state == .normal)
    }

    @Test func updatesYieldOnlyChangesOfTheCombinedValue() async throws {
        let first = MockPowerSource(.normal)
        let second = MockPowerSource(.normal)
        let combined = CombinedPowerSource([first, second], logger: quietLogger())
        try await running({ try await combined.run() }) {
            try await first.waitForSubscriber()
            try await second.waitForSubscriber()
            let updates = PowerUpdates(combined.updates())
            second.set(.lowPower)
            #expect(try await updates.waitFor(count: 1) == [.lowPower])
            first.set(.lowPower)  // still lowPower: nothing to yield
            first.set(.critical)
            #expect(try await updates.waitFor(count: 2) == [.lowPower, .critical])
            second.set(.normal)  // first is still critical
            first.set(.normal)
            #expect(try await updates.waitFor(count: 3) == [.lowPower, .critical, .normal])
        }
    }

    @Test func theManualOverrideWinsWhileSet() async throws {
        let host = MockPowerSource(.lowPower)
        let manual = ManualPowerSource()
        let combined = CombinedPowerSource([host], override: manual, logger: quietLogger())
        #expect(combined.state == .lowPower)
        try await running({ try await combined.run() }) {
            try await host.waitForSubscriber()
            let updates = PowerUpdates(combined.updates())
            manual.set(.normal)  // overrides a host on battery
            #expect(try await updates.waitFor(count: 1) == [.normal])
            host.set(.critical)  // ignored while overridden
            manual.set(.critical)
            #expect(try await updates.waitFor(count: 2) == [.normal, .critical])
            manual.set(nil)  // the host is critical too: no change
            host.set(.lowPower)
            #expect(try await updates.waitFor(count: 3) == [.normal, .critical, .lowPower])
            #expect(combined.state == .lowPower)
        }
    }

    @Test func runRunsThePartsThatAreServices() async throws {
        let fixture = try SysfsFixture()
        try fixture.battery(capacity: 50, status: "Charging")
        let clock = TestClock()
        let (logger, _) = CapturingLogHandler.logger()
        let sysfs = try SysfsPowerSource(root: fixture.root, clock: clock, logger: logger)
        let combined = CombinedPowerSource([sysfs, MockPowerSource(.normal)], logger: logger)
        try await running({ try await combined.run() }) {
            let updates = PowerUpdates(combined.updates())
            try await clock.waitForSleeper(until: clock.now.advanced(by: .seconds(30)))
            try fixture.battery(capacity: 50, status: "Discharging")
            clock.advance(by: .seconds(30))
            #expect(try await updates.waitFor(count: 1) == [.lowPower])
        }
    }
}
