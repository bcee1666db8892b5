import LocalServices
import TestHarness
import HostPower
import KeepAlive
import KeepAliveTesting
import Testing

@Suite struct SysfsPowerSourceTests {
    func source(_ fixture: SysfsFixture, criticalPercentage: Double = 10, clock: TestClock = TestClock()) throws -> (
        SysfsPowerSource, CapturingLogHandler.Store
    ) {
        let (logger, logs) = CapturingLogHandler.logger()
        return (
            try SysfsPowerSource(
                root: fixture.root, criticalPercentage: criticalPercentage, clock: clock, logger: logger), logs
        )
    }

    @Test func mainsOnlineIsNormal() throws {
        let fixture = try SysfsFixture()
        try fixture.mains(online: true)
        try fixture.battery(capacity: 80, status: "Charging")
        let (sysfs, _) = try source(fixture)
        #expect(sysfs.refresh() == .normal)
        #expect(sysfs.summary == "sysfs: AC online, BAT0 80% Charging")
    }

    @Test func batteryDischargingWithoutMainsIsLowPower() throws {
        let fixture = try SysfsFixture()
        try fixture.mains(online: false)
        try fixture.battery(capacity: 50, status: "Discharging")
        let (sysfs, _) = try source(fixture)
        #expect(sysfs.refresh() == .lowPower)
    }

    @Test func batteryDischargingWithNoMainsSupplyAtAllIsLowPower() throws {
        let fixture = try SysfsFixture()
        try fixture.battery(capacity: 50, status: "Discharging")
        let (sysfs, _) = try source(fixture)
        #expect(sysfs.refresh() == .lowPower)
    }

    @Test func usbSupplyOnlineCountsAsMains() throws {
        let fixture = try SysfsFixture()
        try fixture.supply("usb", ["type": "USB", "online": "1"])
        try fixture.battery(capacity: 50, status: "Discharging")
        let (sysfs, _) = try source(fixture)
        #expect(sysfs.refresh() == .normal)
    }

    @Test func batteryAtOrBelowTheCriticalPercentageWhileDischargingIsCritical() throws {
        let fixture = try SysfsFixture()
        try fixture.mains(online: false)
        try fixture.battery(capacity: 5, status: "Discharging")
        let (sysfs, _) = try source(fixture)
        #expect(sysfs.refresh() == .critical)
        try fixture.battery(capacity: 10, status: "Discharging")
        #expect(sysfs.refresh() == .critical)
        try fixture.battery(capacity: 11, status: "Discharging")
        #expect(sysfs.refresh() == .lowPower)
        try fixture.battery(capacity: 5, status: "Charging")
        #expect(sysfs.refresh() == .normal)
    }

    @Test func aPeripheralsBatteryIsLeftOut() throws {
        let fixture = try SysfsFixture()
        try fixture.battery("hid_mouse_battery", capacity: 3, status: "Discharging", scope: "Device")
        let (sysfs, _) = try source(fixture)
        #expect(sysfs.refresh() == .normal)
        #expect(sysfs.summary.contains("no mains supply or battery"), "\(sysfs.summary)")
    }

    @Test func aMissingRootIsNormalWithOneLogLine() throws {
        let fixture = try SysfsFixture()
        let (logger, logs) = CapturingLogHandler.logger()
        let sysfs = try SysfsPowerSource(root: fixture.root + "/absent", clock: TestClock(), logger: logger)
        #expect(sysfs.refresh() == .normal)
        #expect(sysfs.refresh() == .normal)
        #expect(sysfs.refresh() == .normal)
        #expect(logs.count(containing: "no power supplies readable") == 1, "\(logs.messages)")
        #expect(sysfs.summary.contains("No such file or directory"), "\(sysfs.summary)")
    }

    @Test func anUnreadableRootIsNormalAndABatteryLaterIsSeen() throws {
        let fixture = try SysfsFixture()
        // A file where the directory should be: opendir fails (ENOTDIR) even for root, unlike chmod 000.
        try fixture.supply("x", ["type": "Battery"])
        let (logger, logs) = CapturingLogHandler.logger()
        let sysfs = try SysfsPowerSource(root: fixture.root + "/x/type", clock: TestClock(), logger: logger)
        #expect(sysfs.refresh() == .normal)
        #expect(logs.count(containing: "no power supplies readable") == 1, "\(logs.messages)")
        #expect(sysfs.summary.contains("Not a directory"), "\(sysfs.summary)")
    }

    @Test func pollsEveryIntervalOnTheClockWhileSubscribed() async throws {
        let fixture = try SysfsFixture()
        try fixture.mains(online: true)
        try fixture.battery(capacity: 50, status: "Charging")
        let clock = TestClock()
        let (sysfs, _) = try source(fixture, clock: clock)
        try await running({ try await sysfs.run() }) {
            try await waitUntil("the first reading, then idle") { sysfs.readCount >= 1 && sysfs.isIdle }
            #expect(clock.pendingDeadlines.isEmpty)
            let updates = PowerUpdates(sysfs.updates())
            try await clock.waitForSleeper(until: clock.now.advanced(by: .seconds(30)))
            #expect(sysfs.readCount == 2)  // a new subscriber gets a fresh reading
            try fixture.mains(online: false)
            try fixture.battery(capacity: 50, status: "Discharging")
            clock.advance(by: .seconds(30))
            #expect(try await updates.waitFor(count: 1) == [.lowPower])
            try await clock.waitForSleeper(until: clock.now.advanced(by: .seconds(30)))
            try fixture.battery(capacity: 4, status: "Discharging")
            clock.advance(by: .seconds(30))
            #expect(try await updates.waitFor(count: 2) == [.lowPower, .critical])
            try await clock.waitForSleeper(until: clock.now.advanced(by: .seconds(30)))
            // Nobody listens any more: the pending sleep ends without a reading and no new timer is set.
            updates.cancel()
            try await waitUntil("the subscription ends") { !sysfs.hasSubscribers }
            let reads = sysfs.readCount
            clock.advance(by: .seconds(30))
            try await waitUntil("the poller parks") { sysfs.isIdle }
            #expect(sysfs.readCount == reads)
            #expect(clock.pendingDeadlines.isEmpty)
        }
    }

    @Test func theIntervalIsConfigurable() async throws {
        let fixture = try SysfsFixture()
        try fixture.battery(capacity: 50, status: "Charging")
        let clock = TestClock()
        let (logger, _) = CapturingLogHandler.logger()
        let sysfs = try SysfsPowerSource(root: fixture.root, pollInterval: .seconds(5), clock: clock, logger: logger)
        try await running({ try await sysfs.run() }) {
            let updates = PowerUpdates(sysfs.updates())
            try await clock.waitForSleeper(until: clock.now.advanced(by: .seconds(5)))
            try fixture.battery(capacity: 50, status: "Discharging")
            clock.advance(by: .seconds(5))
            #expect(try await updates.waitFor(count: 1) == [.lowPower])
        }
    }
}

@Suite struct SysfsPowerSourceConfigurationTests {
    @Test func aPollIntervalThatIsNotPositiveIsRefusedNamingTheField() {
        let (logger, _) = CapturingLogHandler.logger()
        #expect {
            _ = try SysfsPowerSource(root: "/nonexistent", pollInterval: .zero, logger: logger)
        } throws: { error in
            (error as? ConfigurationValueError)?.field == "SysfsPowerSource.pollInterval"
        }
    }
}
