import DBus
import LocalServices
import TestHarness
import Foundation
import HostPower
import KeepAlive
import Testing

/// UPower's names, spelled here independently of the module under test.
enum UPower {
    static let name = "org.freedesktop.UPower"
    static let path: ObjectPath = "/org/freedesktop/UPower"
    static let interface = "org.freedesktop.UPower"
    static let displayDevice: ObjectPath = "/org/freedesktop/UPower/devices/DisplayDevice"

    static func arguments(_ parameters: String? = nil) -> [String] {
        ["--template", "upower"] + (parameters.map { ["--parameters", $0] } ?? [])
    }
}

extension DBusMock {
    func setOnBattery(_ onBattery: Bool) async throws {
        try await setProperty("OnBattery", .boolean(onBattery), path: UPower.path, interface: UPower.interface)
    }

    /// The upower template's `SetDeviceProperties`: one `Set` (and one PropertiesChanged) per property.
    func setDisplayDevice(_ properties: [String: DBusValue]) async throws {
        try await callMock(
            "SetDeviceProperties", path: UPower.path, [.objectPath(UPower.displayDevice), .properties(properties)])
    }
}

/// Runs `service` (its `run()`) beside `body`, cancelling it when `body` ends.
func running<T: Sendable>(_ run: @escaping @Sendable () async throws -> Void, _ body: () async throws -> T) async throws
    -> T
{
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await run() }
        defer { group.cancelAll() }
        return try await body()
    }
}

@Suite struct UPowerPowerSourceTests {
    /// A private bus with the upower template and a running source on its own connection.
    func withUPower(
        _ parameters: String? = nil, criticalPercentage: Double = 10,
        _ body: (UPowerPowerSource, DBusMock, CapturingLogHandler.Store) async throws -> Void
    ) async throws {
        try await PrivateBus.with { bus in
            let driver = try await bus.connect()
            let connection = try await bus.connect()
            try await DBusMock.with(on: bus, driver: driver, UPower.arguments(parameters), owning: UPower.name) {
                mock in
                let (logger, logs) = CapturingLogHandler.logger()
                let source = UPowerPowerSource(
                    connection: connection, criticalPercentage: criticalPercentage, logger: logger)
                try await running({ try await source.run() }) {
                    try await waitUntil("UPower is read") { source.syncCount >= 1 }
                    try await body(source, mock, logs)
                }
            }
        }
    }

    @Test func onBatteryIsLowPowerAndMainsIsNormalAgain() async throws {
        try await withUPower { source, mock, _ in
            #expect(source.state == .normal)
            let updates = PowerUpdates(source.updates())
            try await mock.setOnBattery(true)
            #expect(try await updates.waitFor(count: 1) == [.lowPower])
            #expect(source.state == .lowPower)
            #expect(source.summary.contains("on battery"), "\(source.summary)")
            try await mock.setOnBattery(false)
            #expect(try await updates.waitFor(count: 2) == [.lowPower, .normal])
            #expect(source.state == .normal)
        }
    }

    @Test func onBatteryAtStartIsReadAsLowPower() async throws {
        try await withUPower(#"{"OnBattery": true}"#) { source, _, _ in
            #expect(source.state == .lowPower)
        }
    }

    @Test func batteryAtOrBelowTheCriticalPercentageOnBatteryIsCritical() async throws {
        try await withUPower { source, mock, _ in
            let updates = PowerUpdates(source.updates())
            try await mock.setDisplayDevice([
                "IsPresent": .boolean(true), "Percentage": .double(5), "State": .uint32(2),
            ])
            // On mains a low battery is charging: still normal.
            try await waitUntil("the display device is read") { source.summary.contains("5%") }
            #expect(source.state == .normal)
            try await mock.setOnBattery(true)
            #expect(try await updates.waitFor(count: 1) == [.critical])
            try await mock.setDisplayDevice(["Percentage": .double(50)])
            #expect(try await updates.waitFor(count: 2) == [.critical, .lowPower])
            try await mock.setDisplayDevice(["Percentage": .double(10)])  // "at or below"
            #expect(try await updates.waitFor(count: 3) == [.critical, .lowPower, .critical])
        }
    }

    @Test func theCriticalPercentageIsConfigurable() async throws {
        try await withUPower(#"{"OnBattery": true}"#, criticalPercentage: 25) { source, mock, _ in
            #expect(source.state == .lowPower)
            try await mock.setDisplayDevice(["IsPresent": .boolean(true), "Percentage": .double(20)])
            try await waitUntil("20% is critical with a 25% threshold") { source.state == .critical }
        }
    }

    @Test func aLowPercentageWithoutABatteryPresentIsNotCritical() async throws {
        // The template's display device starts with Percentage 0 and IsPresent false: a desktop on battery?
        // No battery to be critical about.
        try await withUPower(#"{"OnBattery": true}"#) { source, _, _ in
            #expect(source.state == .lowPower)
        }
    }

    @Test func criticalAndActionWarningLevelsAreCritical() async throws {
        try await withUPower { source, mock, _ in
            let updates = PowerUpdates(source.updates())
            try await mock.setDisplayDevice(["WarningLevel": .uint32(3)])  // low: not yet critical
            try await mock.setOnBattery(true)
            #expect(try await updates.waitFor(count: 1) == [.lowPower])
            try await mock.setDisplayDevice(["WarningLevel": .uint32(4)])
            #expect(try await updates.waitFor(count: 2) == [.lowPower, .critical])
            #expect(source.summary.contains("critical"), "\(source.summary)")
            try await mock.setDisplayDevice(["WarningLevel": .uint32(1)])
            #expect(try await updates.waitFor(count: 3) == [.lowPower, .critical, .lowPower])
            try await mock.setDisplayDevice(["WarningLevel": .uint32(5)])
            #expect(try await updates.waitFor(count: 4) == [.lowPower, .critical, .lowPower, .critical])
        }
    }

    @Test func upowerLeavingTheBusIsNormalWithALogLineAndItsReturnIsReadAgain() async throws {
        try await PrivateBus.with { bus in
            let driver = try await bus.connect()
            let connection = try await bus.connect()
            let (logger, logs) = CapturingLogHandler.logger()
            let source = UPowerPowerSource(connection: connection, logger: logger)
            let first = try await DBusMock.start(
                on: bus, driver: driver, UPower.arguments(#"{"OnBattery": true}"#), owning: UPower.name)
            var second: DBusMock?
            do {
                try await running({ try await source.run() }) {
                    try await waitUntil("UPower is read") { source.state == .lowPower }
                    let updates = PowerUpdates(source.updates())
                    await first.stop()
                    #expect(try await updates.waitFor(count: 1) == [.normal])
                    #expect(!source.isServicePresent)
                    #expect(logs.count(containing: "UPower left the bus") == 1, "\(logs.messages)")
                    second = try await DBusMock.start(
                        on: bus, driver: driver, UPower.arguments(#"{"OnBattery": true}"#), owning: UPower.name)
                    #expect(try await updates.waitFor(count: 2) == [.normal, .lowPower])
                    #expect(source.syncCount == 2)
                    #expect(source.isServicePresent)
                }
            } catch {
                await first.stop()
                await second?.stop()
                throw error
            }
            await first.stop()
            await second?.stop()
        }
    }

    @Test func upowerAbsentAtStartIsNormalAndPickedUpWhenItAppears() async throws {
        try await PrivateBus.with { bus in
            let driver = try await bus.connect()
            let connection = try await bus.connect()
            let (logger, logs) = CapturingLogHandler.logger()
            let source = UPowerPowerSource(connection: connection, logger: logger)
            try await running({ try await source.run() }) {
                try await waitUntil("the source says UPower is absent") { source.summary.contains("not on the bus") }
                #expect(source.state == .normal)
                #expect(logs.count(containing: "UPower is not on the bus") == 1, "\(logs.messages)")
                let updates = PowerUpdates(source.updates())
                try await DBusMock.with(
                    on: bus, driver: driver, UPower.arguments(#"{"OnBattery": true}"#), owning: UPower.name
                ) { _ in
                    let values = try await updates.waitFor(count: 1)
                    #expect(values == [.lowPower])
                }
            }
        }
    }

    @Test func losingTheBusConnectionFallsBackToNormalAndEndsRun() async throws {
        try await PrivateBus.with { bus in
            let driver = try await bus.connect()
            let connection = try await bus.connect()
            try await DBusMock.with(
                on: bus, driver: driver, UPower.arguments(#"{"OnBattery": true}"#), owning: UPower.name
            ) { _ in
                let (logger, logs) = CapturingLogHandler.logger()
                let source = UPowerPowerSource(connection: connection, logger: logger)
                let run = Task { try await source.run() }
                defer { run.cancel() }
                try await waitUntil("UPower is read") { source.state == .lowPower }
                let updates = PowerUpdates(source.updates())
                await connection.close()
                #expect(try await updates.waitFor(count: 1) == [.normal])
                let error = await #expect(throws: DBusError.self) {
                    try await withTimeout("run() ends") { try await run.value }
                }
                #expect(error?.code == .disconnected)
                #expect(logs.count(containing: "lost the bus connection") == 1, "\(logs.messages)")
            }
        }
    }

    /// Not a benchmark: a figure for the report, and a generous bound so a stuck pipeline fails.
    @Test func delayFromTheMockFlippingOnBatteryToAnUpdate() async throws {
        try await withUPower { source, mock, _ in
            let updates = PowerUpdates(source.updates())
            var delays: [Duration] = []
            for flip in 0..<20 {
                let onBattery = flip % 2 == 0
                let sent = ContinuousClock.now
                try await mock.setOnBattery(onBattery)
                let values = try await updates.waitFor(count: flip + 1)
                #expect(values[flip] == (onBattery ? .lowPower : .normal))
                delays.append(updates.arrivals[flip] - sent)
            }
            let sorted = delays.sorted()
            let median = (sorted[9] + sorted[10]) / 2
            print(
                "UPower OnBattery flip → updates(): median \(Self.milliseconds(median)) over 20 flips "
                    + "(min \(Self.milliseconds(sorted[0])), max \(Self.milliseconds(sorted[19])))")
            #expect(median < .seconds(1))
        }
    }

    static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return String(format: "%.2f ms", Double(seconds) * 1_000 + Double(attoseconds) / 1e15)
    }
}
