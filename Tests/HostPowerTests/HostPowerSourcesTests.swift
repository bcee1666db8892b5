import DBus
import LocalServices
import TestHarness
import HostPower
import KeepAlive
import KeepAliveTesting
import Testing

@Suite struct HostPowerSourcesTests {
    @Test func upowerAndPowerProfilesOnTheBusAreCombined() async throws {
        try await PrivateBus.with { bus in
            let driver = try await bus.connect()
            let connection = try await bus.connect()
            let fixture = try SysfsFixture()
            try fixture.battery(capacity: 50, status: "Discharging")  // UPower present: sysfs is not used
            try await DBusMock.with(on: bus, driver: driver, UPower.arguments(), owning: UPower.name) { upower in
                try await DBusMock.with(
                    on: bus, driver: driver, PowerProfiles.hadessArguments(), owning: PowerProfiles.hadess.name
                ) { profiles in
                    let (logger, _) = CapturingLogHandler.logger()
                    let (power, description) = await HostPowerSources.automatic(
                        connection: connection, sysfsRoot: fixture.root, clock: TestClock(), logger: logger)
                    #expect(
                        description
                            == "UPower (org.freedesktop.UPower) + power-profiles-daemon (net.hadess.PowerProfiles)")
                    #expect(power.sources.count == 2)
                    #expect(power.sources.first is UPowerPowerSource)
                    #expect(power.sources.last is PowerProfilesPowerSource)
                    try await running({ try await power.run() }) {
                        let updates = PowerUpdates(power.updates())
                        // Both parts must be live before the flips count.
                        let upowerPart = try #require(power.sources.first as? UPowerPowerSource)
                        let profilesPart = try #require(power.sources.last as? PowerProfilesPowerSource)
                        try await waitUntil("both parts are read") {
                            upowerPart.syncCount >= 1 && profilesPart.syncCount >= 1
                        }
                        try await profiles.setActiveProfile("power-saver", PowerProfiles.hadess)
                        #expect(try await updates.waitFor(count: 1) == [.lowPower])
                        try await upower.callMock(
                            "SetDeviceProperties", path: UPower.path,
                            [.objectPath(UPower.displayDevice), .properties(["WarningLevel": .uint32(4)])])
                        #expect(try await updates.waitFor(count: 2) == [.lowPower, .critical])
                    }
                }
            }
        }
    }

    @Test func upowerAloneIsUsedWithoutPowerProfiles() async throws {
        try await PrivateBus.with { bus in
            let driver = try await bus.connect()
            let connection = try await bus.connect()
            try await DBusMock.with(on: bus, driver: driver, UPower.arguments(), owning: UPower.name) { _ in
                let (logger, _) = CapturingLogHandler.logger()
                let (power, description) = await HostPowerSources.automatic(
                    connection: connection, sysfsRoot: "/nonexistent", clock: TestClock(), logger: logger)
                #expect(description == "UPower (org.freedesktop.UPower)")
                #expect(power.sources.count == 1)
                #expect(power.sources.first is UPowerPowerSource)
            }
        }
    }

    @Test func sysfsIsUsedWhenUPowerIsNotOnTheBus() async throws {
        try await PrivateBus.with { bus in
            let connection = try await bus.connect()
            let fixture = try SysfsFixture()
            try fixture.mains(online: false)
            try fixture.battery(capacity: 50, status: "Discharging")
            let clock = TestClock()
            let (logger, _) = CapturingLogHandler.logger()
            let (power, description) = await HostPowerSources.automatic(
                connection: connection, sysfsRoot: fixture.root, clock: clock, logger: logger)
            #expect(description == "sysfs \(fixture.root) (AC, BAT0)")
            #expect(power.sources.count == 1)
            let sysfs = try #require(power.sources.first as? SysfsPowerSource)
            try await running({ try await power.run() }) {
                try await waitUntil("the first reading") { sysfs.readCount >= 1 }
                try await waitUntil("on battery") { power.state == .lowPower }
            }
        }
    }

    @Test func powerProfilesWithoutUPowerAreCombinedWithSysfs() async throws {
        try await PrivateBus.with { bus in
            let driver = try await bus.connect()
            let connection = try await bus.connect()
            let fixture = try SysfsFixture()
            try fixture.battery(capacity: 50, status: "Charging")
            let newer = try await PowerProfiles.startUPowerNamed(on: bus, driver: driver, profile: "balanced")
            let (logger, _) = CapturingLogHandler.logger()
            let (power, description) = await HostPowerSources.automatic(
                connection: connection, sysfsRoot: fixture.root, clock: TestClock(), logger: logger)
            await newer.stop()
            #expect(
                description
                    == "sysfs \(fixture.root) (BAT0) + power-profiles-daemon (org.freedesktop.UPower.PowerProfiles)")
            #expect(power.sources.first is SysfsPowerSource)
            #expect(power.sources.last is PowerProfilesPowerSource)
        }
    }

    @Test func nothingFoundIsAlwaysNormal() async throws {
        try await PrivateBus.with { bus in
            let connection = try await bus.connect()
            let fixture = try SysfsFixture()  // empty
            let (logger, _) = CapturingLogHandler.logger()
            let (power, description) = await HostPowerSources.automatic(
                connection: connection, sysfsRoot: fixture.root, clock: TestClock(), logger: logger)
            #expect(description.hasPrefix("none found"), "\(description)")
            #expect(power.sources.count == 1)
            #expect(power.sources.first is FixedPowerSource)
            #expect(power.state == .normal)
        }
    }
}
