import DBus
import LocalServices
import TestHarness
import HostPower
import Basics
import Testing

/// logind's names, spelled here independently of the module under test.
enum Logind {
    static let name = "org.freedesktop.login1"
    static let path: ObjectPath = "/org/freedesktop/login1"
    static let manager = "org.freedesktop.login1.Manager"
}

extension DBusMock {
    func emitPrepareForSleep(_ sleeping: Bool) async throws {
        try await callMock(
            "EmitSignal", path: Logind.path,
            [
                .string(Logind.manager), .string("PrepareForSleep"), .string("b"),
                .array(element: "v", [.variant(.boolean(sleeping))]),
            ])
    }

    /// The inhibitors logind holds: (what, who, why, mode).
    func inhibitors() async throws -> [[DBusValue]] {
        let reply = try await driver.call(
            destination: Logind.name, path: Logind.path, interface: Logind.manager, method: "ListInhibitors",
            timeout: .seconds(10))
        guard case .array(_, let items)? = reply.first else { return [] }
        return items.compactMap { if case .structure(let fields) = $0 { fields } else { nil } }
    }
}

@Suite struct SleepInhibitorTests {
    @Test func holdsADelayInhibitorReleasesItAfterPreparingForSleepAndTakesItAgainOnWake() async throws {
        try await PrivateBus.with { bus in
            let driver = try await bus.connect()
            try await DBusMock.with(on: bus, driver: driver, ["--template", "logind"], owning: Logind.name) { mock in
                let connection = try await bus.connect()
                let events = Locked<[String]>([])
                let (logger, _) = CapturingLogHandler.logger()
                let sleep = SleepInhibitor(
                    connection: connection, logger: logger,
                    prepare: {
                        events.withLock { $0.append("prepare") }
                        // Ending windows and disconnecting takes a while.
                        try? await Task.sleep(for: .milliseconds(200))
                        events.withLock { $0.append("prepared") }
                    },
                    resume: { events.withLock { $0.append("resume") } })
                try await running({ try await sleep.run() }) {
                    try await waitUntil("the inhibitor is held") { try await mock.inhibitors().count == 1 }
                    let held = try await mock.inhibitors()[0]
                    #expect(held.first == .string("sleep"))
                    #expect(held[1] == .string("keepalive"))
                    #expect(held[3] == .string("delay"))

                    try await mock.emitPrepareForSleep(true)
                    // Released only after the work was put away.
                    try await waitUntil("the inhibitor is released") { try await mock.inhibitors().isEmpty }
                    #expect(events.withLock { $0 } == ["prepare", "prepared"])
                    let delay = try #require(sleep.statistics.lastReleaseDelay)
                    #expect(delay >= .milliseconds(200) && delay < .seconds(2), "released after \(delay)")

                    try await mock.emitPrepareForSleep(false)
                    try await waitUntil("resumed with a new inhibitor") {
                        try await mock.inhibitors().count == 1 && events.withLock { $0.last == "resume" }
                    }
                    #expect(sleep.statistics.inhibitorsTaken == 2)
                    #expect(sleep.statistics.sleeps == 1 && sleep.statistics.wakes == 1)
                }
                await connection.close()
            }
            await driver.close()
        }
    }

    @Test func aPrepareThatOverrunsItsBoundStillReleasesTheInhibitorInTime() async throws {
        try await PrivateBus.with { bus in
            let driver = try await bus.connect()
            try await DBusMock.with(on: bus, driver: driver, ["--template", "logind"], owning: Logind.name) { mock in
                let connection = try await bus.connect()
                let (logger, log) = CapturingLogHandler.logger()
                let sleep = SleepInhibitor(
                    connection: connection, prepareBound: .milliseconds(300), logger: logger,
                    prepare: { try? await Task.sleep(for: .seconds(30)) }, resume: {})
                try await running({ try await sleep.run() }) {
                    try await waitUntil("the inhibitor is held") { try await mock.inhibitors().count == 1 }
                    try await mock.emitPrepareForSleep(true)
                    try await waitUntil("the inhibitor is released at the bound", timeout: .seconds(3)) {
                        try await mock.inhibitors().isEmpty
                    }
                    #expect(log.count(containing: "bound reached") == 1)
                }
                await connection.close()
            }
            await driver.close()
        }
    }

    @Test func withoutLogindItSaysSoAndReturns() async throws {
        try await PrivateBus.with { bus in
            let connection = try await bus.connect()
            let (logger, log) = CapturingLogHandler.logger()
            let sleep = SleepInhibitor(connection: connection, logger: logger, prepare: {}, resume: {})
            try await withTimeout("run returns") { try await sleep.run() }
            #expect(log.count(containing: "sleep is not tracked") == 1)
            #expect(!sleep.isHoldingInhibitor)
            await connection.close()
        }
    }
}
