import Basics
import BlueZSimulator
import DBus
import LocalServices
import TestHarness
import Testing

extension BlueZSimulatorTests {
    @Suite struct Lifecycle {
        @Test func aCrashTakesOrgBluezOffTheBusWithoutInterfacesRemoved() async throws {
            try await Harness.with { harness in
                try await harness.connect()
                let signals = try await harness.client.signals(
                    matching: MatchRule(
                        interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesRemoved"))
                let owners = try await harness.client.nameOwnerChanges(for: "org.bluez")
                await harness.simulator.crash()
                let gone = try await withTimeout("org.bluez leaves") {
                    for try await change in owners where change.newOwner == nil { return change }
                    throw TimedOut(what: "owner stream ended")
                }
                #expect(gone.oldOwner != nil)
                #expect(try await harness.client.nameOwner(of: "org.bluez") == nil)
                let call = await dbusError { _ = try await harness.objects() }
                #expect(call?.name == "org.freedesktop.DBus.Error.ServiceUnknown")
                // Ping a name of the bus itself so every signal sent before the crash has been delivered.
                try await harness.client.ping(destination: "org.freedesktop.DBus")
                let removed = try? await withTimeout("a stray InterfacesRemoved", .milliseconds(200)) {
                    for try await signal in signals { return signal }
                    throw TimedOut(what: "stream ended")
                }
                #expect(removed == nil, "a crash sends no InterfacesRemoved")
                #expect(harness.simulator.connectedDevices.isEmpty)
                try await harness.simulator.restart()
                #expect(try await harness.objects()[Harness.devicePath(Harness.first)] != nil)
            }
        }

        /// bluetoothd 5.66 SIGKILLed in the qemu lab: the kernel keeps the link, the next bluetoothd shows it
        /// Connected=true without ServicesResolved, a Connect returns OK without resolving anything, and the
        /// kernel drops the link 1.5–2 s after the crash.
        @Test func aCrashLeavesTheKernelsLinkUpForTheNextBluetoothdUntilTheKernelDropsIt() async throws {
            try await Harness.with(Harness.configuration { $0.latencies.kernelLinkAfterCrash = .seconds(50) }) {
                harness in
                try await harness.connect()
                await harness.simulator.crash()
                try await harness.simulator.restart()
                #expect(try await harness.deviceProperty(Harness.first, "Connected") == .boolean(true))
                #expect(try await harness.deviceProperty(Harness.first, "ServicesResolved") == .boolean(false))
                try await harness.device(harness.client, Harness.first, "Connect")
                #expect(try await harness.deviceProperty(Harness.first, "ServicesResolved") == .boolean(false))
                try await waitUntil("the kernel drops the link (50 s × 0.01)") {
                    try await harness.deviceProperty(Harness.first, "Connected") == .boolean(false)
                }
                try await harness.connect()  // a fresh link resolves as usual
            }
        }

        @Test func aGracefulRestartRemovesEverythingThenRebuildsTheTreeDisconnected() async throws {
            try await Harness.with { harness in
                try await harness.connect()
                let signals = try await harness.client.signals(
                    matching: MatchRule(
                        interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesRemoved"))
                let owners = try await harness.client.nameOwnerChanges(for: "org.bluez")
                let restart = Task { try await harness.simulator.restart() }
                let removed = try await collect(signals) { $0.removedPath == Harness.adapter }
                #expect(removed.contains { $0.removedPath == Harness.devicePath(Harness.first) })
                #expect(removed.contains { $0.removedPath?.rawValue.contains("/char") == true })
                let changes = try await withTimeout("org.bluez leaves and comes back") {
                    var changes: [NameOwnerChange] = []
                    for try await change in owners {
                        changes.append(change)
                        if change.newOwner != nil { break }
                    }
                    return changes
                }
                #expect(changes.first?.newOwner == nil && changes.last?.newOwner != nil)
                try await restart.value
                let objects = try await harness.objects()
                #expect(
                    objects[Harness.devicePath(Harness.first)]?["org.bluez.Device1"]?["Connected"] == .boolean(false))
                #expect(!objects.keys.contains { $0.rawValue.contains("/service") }, "GATT comes back on connection")
                try await harness.connect()
            }
        }

        @Test func quirkServicesResolvedArrivesBeforeTheGATTObjects() async throws {
            try await Harness.with(Harness.configuration { $0.quirks = [.servicesResolvedBeforeGATT] }) { harness in
                let signals = try await harness.bluezSignals()
                try await harness.device(harness.client, Harness.first, "Connect")
                let received = try await collect(signals) { $0.addedPath?.rawValue.contains("/service") == true }
                let resolved = try #require(received.firstIndex { $0.changed["ServicesResolved"] == .boolean(true) })
                let gatt = try #require(received.firstIndex { $0.addedPath?.rawValue.contains("/service") == true })
                #expect(resolved < gatt)
            }
        }

        @Test func quirkConnectedIsTrueWithoutItsSignal() async throws {
            try await Harness.with(Harness.configuration { $0.quirks = [.noConnectedSignal] }) { harness in
                let signals = try await harness.bluezSignals()
                try await harness.device(harness.client, Harness.first, "Connect")
                #expect(try await harness.deviceProperty(Harness.first, "Connected") == .boolean(true))
                let received = try await collect(signals) { $0.changed["ServicesResolved"] == .boolean(true) }
                #expect(!received.contains { $0.changed["Connected"] != nil })
            }
        }

        @Test func theControlInterfaceInjectsFaultsAndReportsStatistics() async throws {
            try await Harness.with { harness in
                let control = try await harness.bus.connect()
                func call(_ method: String, _ arguments: [DBusValue]) async throws -> [DBusValue] {
                    try await control.call(
                        destination: BlueZSimulator.controlName, path: BlueZSimulator.controlPath,
                        interface: BlueZSimulator.controlInterface, method: method, arguments: arguments)
                }
                _ = try await call(
                    "InjectFault",
                    [
                        .string(Harness.first), .string("connect-abort"),
                        .dictionary(
                            key: "s", value: "v",
                            [DBusDictionaryEntry(key: .string("count"), value: .variant(.uint32(1)))]),
                    ])
                let error = await dbusError { try await harness.device(harness.client, Harness.first, "Connect") }
                #expect(error?.message == "le-connection-abort-by-local")
                try await harness.connect()
                let connected = try await control.getProperty(
                    "ConnectedDevices", interface: BlueZSimulator.controlInterface,
                    destination: BlueZSimulator.controlName,
                    path: BlueZSimulator.controlPath)
                #expect(connected == .array(element: "s", [.string(Harness.first)]))
                let counts = try await control.getProperty(
                    "CallCounts", interface: BlueZSimulator.controlInterface, destination: BlueZSimulator.controlName,
                    path: BlueZSimulator.controlPath
                ).decode([String: UInt32].self)
                #expect(counts["Connect"] == 2)
                let path = try await call(
                    "AddDevice",
                    [
                        .string("C0:FF:EE:00:10:00"), .string("Late"), .dictionary(key: "s", value: "v", []),
                    ])
                #expect(path.first?.objectPath == Harness.devicePath("C0:FF:EE:00:10:00"))
                _ = try await call("SetAdapterPowered", [.string("hci0"), .boolean(false)])
                #expect(harness.simulator.connectedDevices.isEmpty)
                let unknown = await dbusError {
                    _ = try await call(
                        "InjectFault",
                        [
                            .string(Harness.first), .string("gremlins"), .dictionary(key: "s", value: "v", []),
                        ])
                }
                #expect(unknown != nil)
                _ = try await call("Crash", [])
                try await waitUntil("org.bluez is gone") { try await control.nameOwner(of: "org.bluez") == nil }
                _ = try await call("Restart", [])
                try await waitUntil("org.bluez is back") { try await control.nameOwner(of: "org.bluez") != nil }
            }
        }
    }

    @Suite struct Scale {
        /// A thousand devices (a hundred under ThreadSanitizer, where these two tests alone took 37 s of CPU beside
        /// the whole suite: `Sanitizers.rounds`), ten callers at once.
        @Test func aThousandDevicesArePolledConcurrently() async throws {
            let count = Sanitizers.rounds(1_000)
            try await Harness.with(Harness.configuration(devices: count) { $0.timeScale = 0.001 }) { harness in
                let addresses = [SimulatedDevice].sensors(count: count).map(\.address)
                let clock = ContinuousClock()
                let started = clock.now
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for batch in stride(from: 0, to: addresses.count, by: count / 10) {
                        group.addTask {
                            for address in addresses[batch..<batch + count / 10] {
                                try await harness.device(harness.client, address, "Connect")
                                let battery = try await harness.client.getProperty(
                                    "Connected", interface: "org.bluez.Device1", destination: "org.bluez",
                                    path: Harness.devicePath(address))
                                #expect(battery == .boolean(true))
                                try await harness.device(harness.client, address, "Disconnect")
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                print("\(count) devices connected and disconnected in \(clock.now - started)")
                #expect(harness.simulator.callCounts["Connect"] == count)
                #expect(harness.simulator.callCounts["Disconnect"] == count)
            }
        }

        /// Ten thousand devices in one reply (a thousand under ThreadSanitizer).
        @Test func getManagedObjectsServesTenThousandDevices() async throws {
            let count = Sanitizers.rounds(10_000)
            try await Harness.with(Harness.configuration(devices: count)) { harness in
                let clock = ContinuousClock()
                let started = clock.now
                let objects = try await harness.client.getManagedObjects(
                    destination: "org.bluez", timeout: .seconds(60))
                let elapsed = clock.now - started
                print("GetManagedObjects of \(count) devices: \(objects.count) objects in \(elapsed)")
                #expect(objects.count == count + 2)
                #expect(
                    elapsed < .seconds(10 * sanitizerSlowdown),
                    "a give-up bound (the whole suite runs beside it), not a measurement")
            }
        }
    }
}
