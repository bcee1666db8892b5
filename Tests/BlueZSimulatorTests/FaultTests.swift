import BlueZSimulator
import DBus
import LocalServices
import TestHarness
import Testing

extension BlueZSimulatorTests {
    @Suite struct Faults {
        @Test func connectAbortFailsTheNextConnectsAfterTheDelay() async throws {
            try await Harness.with { harness in
                try await harness.simulator.inject(.connectAbort(count: 2), device: Harness.first)
                for _ in 0..<2 {
                    let error = await dbusError { try await harness.device(harness.client, Harness.first, "Connect") }
                    #expect(error?.name == "org.bluez.Error.Failed" && error?.message == "le-connection-abort-by-local")
                }
                try await harness.connect()
                #expect(harness.simulator.connectedDevices == [Harness.first])
            }
        }

        @Test func anAbsentDeviceTimesOutConnectsWithAbortByLocal() async throws {
            try await Harness.with { harness in
                try await harness.simulator.inject(.absent, device: Harness.first)
                let clock = ContinuousClock()
                let started = clock.now
                let error = await dbusError { try await harness.device(harness.client, Harness.first, "Connect") }
                #expect(error?.message == "le-connection-abort-by-local")
                #expect(clock.now - started >= .milliseconds(400), "41.6 s × 0.01")
            }
        }

        @Test func inProgressFaultAnswersInProgress() async throws {
            try await Harness.with { harness in
                try await harness.connect()
                let counter = try await harness.characteristic(Harness.counter)
                try await harness.simulator.inject(.inProgress, device: Harness.first)
                let read = await dbusError { _ = try await harness.read(counter) }
                #expect(read?.name == "org.bluez.Error.InProgress")
                try harness.simulator.clearFault("in-progress", device: Harness.first)
                #expect(try await harness.read(counter).count == 4)
            }
        }

        @Test func aHungReadTimesOutAfterTheATTTimeoutAndDropsTheLink() async throws {
            try await Harness.with { harness in
                try await harness.connect()
                let counter = try await harness.characteristic(Harness.counter)
                try await harness.simulator.inject(.readHang, device: Harness.first)
                let signals = try await harness.bluezSignals()
                let clock = ContinuousClock()
                let started = clock.now
                let error = await dbusError { _ = try await harness.read(counter) }
                #expect(clock.now - started >= .milliseconds(290), "30 s × 0.01")
                #expect(error?.name == "org.bluez.Error.Failed" && error?.message == "Not connected")
                let received = try await collect(signals) { $0.changed["Connected"] == .boolean(false) }
                #expect(received.last?.path == Harness.devicePath(Harness.first))
            }
        }

        @Test func aPoweredOffPeripheralDropsItsLinkAfterTheSupervisionTimeoutAndStaysAway() async throws {
            try await Harness.with { harness in
                try await harness.connect()
                let signals = try await harness.bluezSignals()
                let clock = ContinuousClock()
                let started = clock.now
                try await harness.simulator.inject(.powerOff, device: Harness.first)
                let received = try await collect(signals) { $0.changed["Connected"] == .boolean(false) }
                #expect(clock.now - started >= .milliseconds(1), "100 ms × 0.01")
                #expect(received.last?.path == Harness.devicePath(Harness.first))
                #expect(received.last?.changed["ServicesResolved"] == .boolean(false))
                let error = await dbusError { try await harness.device(harness.client, Harness.first, "Connect") }
                #expect(error?.message == "le-connection-abort-by-local", "powered off, it does not advertise")
                try harness.simulator.clearFault("power-off", device: Harness.first)
                try await harness.connect()
            }
        }

        @Test func anATTErrorFailsTheReadWithItsCode() async throws {
            try await Harness.with { harness in
                try await harness.connect()
                let counter = try await harness.characteristic(Harness.counter)
                try await harness.simulator.inject(.attError(0x0e), device: Harness.first)
                let error = await dbusError { _ = try await harness.read(counter) }
                #expect(error?.name == "org.bluez.Error.Failed")
                #expect(error?.message == "Operation failed with ATT error: 0x0e")
            }
        }

        @Test func aVanishingDeviceIsRemovedAndItsCallInFlightFailsWithUnknownObject() async throws {
            try await Harness.with(Harness.configuration { $0.latencies.read = .seconds(60) }) { harness in
                try await harness.connect()
                let counter = try await harness.characteristic(Harness.counter)
                let signals = try await harness.bluezSignals()
                let inFlight = Task { await dbusError { _ = try await harness.read(counter) } }
                try await waitUntil("the read is in flight") { harness.simulator.callCounts["ReadValue"] == 1 }
                try await harness.simulator.inject(.vanish, device: Harness.first)
                let error = await inFlight.value
                #expect(error?.name == "org.freedesktop.DBus.Error.UnknownObject")
                let device = Harness.devicePath(Harness.first)
                let received = try await collect(signals) { $0.removedPath == device }
                #expect(received.contains { $0.removedPath == counter })
                #expect(try await harness.objects()[device] == nil)
                let connect = await dbusError { try await harness.device(harness.client, Harness.first, "Connect") }
                #expect(connect?.name == "org.freedesktop.DBus.Error.UnknownObject")
            }
        }

        @Test func powerOffDropsEveryLinkAndRfkillShowsOffBlocked() async throws {
            try await Harness.with { harness in
                try await harness.connect(Harness.first)
                try await harness.connect(Harness.second)
                try await harness.simulator.setPowered(false)
                #expect(harness.simulator.connectedDevices.isEmpty)
                let state = { try await harness.client.getProperty(
                    "PowerState", interface: "org.bluez.Adapter1", destination: "org.bluez", path: Harness.adapter) }
                #expect(try await state() == .string("off"))
                #expect(try await harness.deviceProperty(Harness.first, "Connected") == .boolean(false))
                try await harness.simulator.setPowered(true)
                #expect(try await state() == .string("on"))
                try await harness.simulator.setBlocked(true)
                #expect(try await state() == .string("off-blocked"))
                let blocked = await dbusError {
                    try await harness.client.setProperty(
                        "Powered", interface: "org.bluez.Adapter1", value: .boolean(true), destination: "org.bluez",
                        path: Harness.adapter)
                }
                #expect(blocked?.name == "org.bluez.Error.Blocked")
                try await harness.simulator.setBlocked(false)
                try await harness.client.setProperty(
                    "Powered", interface: "org.bluez.Adapter1", value: .boolean(true), destination: "org.bluez",
                    path: Harness.adapter)
                #expect(try await state() == .string("on"))
            }
        }
    }
}
