import DBus
import LocalServices
import TestHarness
import HostPower
import KeepAlive
import Testing

/// power-profiles-daemon's two names, spelled here independently of the module under test.
enum PowerProfiles {
    static let hadess = (name: "net.hadess.PowerProfiles", path: ObjectPath("/net/hadess/PowerProfiles"))
    static let upower = (
        name: "org.freedesktop.UPower.PowerProfiles", path: ObjectPath("/org/freedesktop/UPower/PowerProfiles")
    )

    /// The dbusmock template (0.28 knows only the older name).
    static func hadessArguments(_ parameters: String? = nil) -> [String] {
        ["--template", "power_profiles_daemon"] + (parameters.map { ["--parameters", $0] } ?? [])
    }

    /// A bare mock owning the newer name, given an `ActiveProfile` through the mock interface.
    static func startUPowerNamed(on bus: PrivateBus, driver: DBusConnection, profile: String) async throws -> DBusMock {
        let mock = try await DBusMock.start(
            on: bus, driver: driver, [upower.name, upower.path.rawValue, upower.name], owning: upower.name)
        do {
            try await mock.callMock(
                "AddProperty", path: upower.path,
                [.string(upower.name), .string("ActiveProfile"), .variant(.string(profile))])
        } catch {
            await mock.stop()
            throw error
        }
        return mock
    }
}

extension DBusMock {
    func setActiveProfile(_ profile: String, _ object: (name: String, path: ObjectPath)) async throws {
        try await setProperty("ActiveProfile", .string(profile), path: object.path, interface: object.name)
    }
}

@Suite struct PowerProfilesPowerSourceTests {
    @Test func powerSaverOnTheOlderNameIsLowPowerAndBalancedIsNormal() async throws {
        try await PrivateBus.with { bus in
            let driver = try await bus.connect()
            let connection = try await bus.connect()
            try await DBusMock.with(
                on: bus, driver: driver, PowerProfiles.hadessArguments(), owning: PowerProfiles.hadess.name
            ) { mock in
                let (logger, _) = CapturingLogHandler.logger()
                let source = PowerProfilesPowerSource(connection: connection, logger: logger)
                try await running({ try await source.run() }) {
                    try await waitUntil("the profile is read") { source.syncCount >= 1 }
                    #expect(source.state == .normal)
                    #expect(source.presentBusNames == [PowerProfiles.hadess.name])
                    #expect(source.summary.contains("balanced"), "\(source.summary)")
                    let updates = PowerUpdates(source.updates())
                    try await mock.setActiveProfile("power-saver", PowerProfiles.hadess)
                    #expect(try await updates.waitFor(count: 1) == [.lowPower])
                    try await mock.setActiveProfile("performance", PowerProfiles.hadess)
                    #expect(try await updates.waitFor(count: 2) == [.lowPower, .normal])
                }
            }
        }
    }

    @Test func powerSaverOnTheUPowerNameIsLowPower() async throws {
        try await PrivateBus.with { bus in
            let driver = try await bus.connect()
            let connection = try await bus.connect()
            let mock = try await PowerProfiles.startUPowerNamed(on: bus, driver: driver, profile: "balanced")
            do {
                let (logger, _) = CapturingLogHandler.logger()
                let source = PowerProfilesPowerSource(connection: connection, logger: logger)
                try await running({ try await source.run() }) {
                    try await waitUntil("the profile is read") { source.syncCount >= 1 }
                    #expect(source.presentBusNames == [PowerProfiles.upower.name])
                    #expect(source.state == .normal)
                    let updates = PowerUpdates(source.updates())
                    try await mock.setActiveProfile("power-saver", PowerProfiles.upower)
                    #expect(try await updates.waitFor(count: 1) == [.lowPower])
                    #expect(source.summary.contains(PowerProfiles.upower.name), "\(source.summary)")
                }
            } catch {
                await mock.stop()
                throw error
            }
            await mock.stop()
        }
    }

    @Test func powerSaverAtStartIsLowPowerAndTheDaemonLeavingIsNormal() async throws {
        try await PrivateBus.with { bus in
            let driver = try await bus.connect()
            let connection = try await bus.connect()
            let (logger, logs) = CapturingLogHandler.logger()
            let source = PowerProfilesPowerSource(connection: connection, logger: logger)
            try await DBusMock.with(
                on: bus, driver: driver, PowerProfiles.hadessArguments(#"{"ActiveProfile": "power-saver"}"#),
                owning: PowerProfiles.hadess.name
            ) { mock in
                try await running({ try await source.run() }) {
                    try await waitUntil("power-saver is read") { source.state == .lowPower }
                    let updates = PowerUpdates(source.updates())
                    await mock.stop()
                    #expect(try await updates.waitFor(count: 1) == [.normal])
                    #expect(logs.count(containing: "power-profiles-daemon left the bus") == 1, "\(logs.messages)")
                }
            }
        }
    }

    @Test func eitherNameInPowerSaverWinsWhenBothArePresent() async throws {
        try await PrivateBus.with { bus in
            let driver = try await bus.connect()
            let connection = try await bus.connect()
            let newer = try await PowerProfiles.startUPowerNamed(on: bus, driver: driver, profile: "balanced")
            do {
                try await DBusMock.with(
                    on: bus, driver: driver, PowerProfiles.hadessArguments(), owning: PowerProfiles.hadess.name
                ) { older in
                    let (logger, _) = CapturingLogHandler.logger()
                    let source = PowerProfilesPowerSource(connection: connection, logger: logger)
                    try await running({ try await source.run() }) {
                        try await waitUntil("both names are read") { source.presentBusNames.count == 2 }
                        #expect(source.state == .normal)
                        try await older.setActiveProfile("power-saver", PowerProfiles.hadess)
                        try await waitUntil("the older name's power-saver counts") { source.state == .lowPower }
                        try await older.setActiveProfile("balanced", PowerProfiles.hadess)
                        try await newer.setActiveProfile("power-saver", PowerProfiles.upower)
                        try await waitUntil("the newer name's power-saver counts") {
                            source.summary.contains(PowerProfiles.upower.name) && source.state == .lowPower
                        }
                    }
                }
            } catch {
                await newer.stop()
                throw error
            }
            await newer.stop()
        }
    }
}
