import BlueZSimulator
import DBus
import LocalServices
import TestHarness
import Testing

extension BlueZSimulatorTests {
    @Suite struct Discovery {
        @Test func theTreeHasAdaptersDevicesAndAgentManagerLikeBluetoothd() async throws {
            try await Harness.with { harness in
                let objects = try await harness.objects()
                #expect(objects["/org/bluez"]?["org.bluez.AgentManager1"] != nil)
                let adapter = try #require(objects[Harness.adapter])
                #expect(adapter["org.bluez.GattManager1"] != nil && adapter["org.bluez.LEAdvertisingManager1"] != nil)
                #expect(adapter["org.bluez.Adapter1"]?["Roles"]?.array?.contains(.string("central")) == true)
                #expect(adapter["org.bluez.Adapter1"]?["PowerState"] == .string("on"))
                let device = try #require(objects[Harness.devicePath(Harness.first)]?["org.bluez.Device1"])
                #expect(device["Address"] == .string(Harness.first))
                #expect(device["AddressType"] == .string("random"))
                #expect(device["Connected"] == .boolean(false))
                #expect(device["RSSI"] == nil, "RSSI exists only while discovering")
                #expect(device["ManufacturerData"]?.dictionaryEntries?.first?.key == .uint16(0xFFFF))
                #expect(
                    device["ManufacturerData"]?.dictionaryEntries?.first?.value.variant?.bytes == [0x4B, 0x41, 0x01])
                // No GATT objects before the first connection.
                #expect(!objects.keys.contains { $0.rawValue.contains("/service") })
            }
        }

        @Test func discoveryIsASessionPerClientConnectionWithRealErrors() async throws {
            try await Harness.with { harness in
                let signals = try await harness.bluezSignals()
                try await harness.adapter(
                    harness.client, "SetDiscoveryFilter",
                    [
                        .dictionary(
                            key: "s", value: "v",
                            [
                                DBusDictionaryEntry(key: .string("Transport"), value: .variant(.string("le"))),
                                DBusDictionaryEntry(key: .string("DuplicateData"), value: .variant(.boolean(false))),
                            ])
                    ])
                try await harness.adapter(harness.client, "StartDiscovery")
                let second = await dbusError { try await harness.adapter(harness.client, "StartDiscovery") }
                #expect(second?.name == "org.bluez.Error.InProgress")
                let other = try await harness.bus.connect()
                let stopWithout = await dbusError { try await harness.adapter(other, "StopDiscovery") }
                #expect(stopWithout?.name == "org.bluez.Error.Failed")
                #expect(stopWithout?.message == "No discovery started")
                // RSSI changes flow while discovering.
                let received = try await collect(signals) { $0.changed["RSSI"] != nil }
                #expect(received.first?.changed["Discovering"] == .boolean(true))
                #expect(try await harness.deviceProperty(Harness.first, "RSSI").int16 != nil)
                try await harness.adapter(harness.client, "StopDiscovery")
                try await waitUntil("Discovering is false") {
                    try await harness.client.getProperty(
                        "Discovering", interface: "org.bluez.Adapter1", destination: "org.bluez", path: Harness.adapter)
                        == .boolean(false)
                }
                let rssiGone = await dbusError { _ = try await harness.deviceProperty(Harness.first, "RSSI") }
                #expect(rssiGone != nil, "RSSI must disappear when discovery stops")
            }
        }

        /// Catches: the discovery's first finding (an RSSI change, a new device) signalled before Discovering=true,
        /// which bluetoothd never does (it follows the kernel's discovery start). A CI run's loaded machine saw it;
        /// with no discovery latency at all it is the usual order unless Discovering=true leaves first.
        @Test func discoveringTrueComesBeforeAnythingTheDiscoveryFinds() async throws {
            let configuration = Harness.configuration { $0.latencies.discovery = .zero }
            try await Harness.with(configuration) { harness in
                let signals = try await harness.bluezSignals()
                for round in 1...20 {
                    try await harness.adapter(harness.client, "StartDiscovery")
                    let started = try await collect(signals) { $0.changed["Discovering"] == .boolean(true) }
                    let early = started.filter { $0.changed["RSSI"] != nil || $0.addedPath != nil }
                    #expect(early.isEmpty, "round \(round): \(early.map(\.member)) before Discovering=true")
                    try await harness.adapter(harness.client, "StopDiscovery")
                    _ = try await collect(signals) { $0.changed["Discovering"] == .boolean(false) }
                }
            }
        }

        @Test func aDiscoverySessionEndsWhenItsClientLeavesTheBus() async throws {
            try await Harness.with { harness in
                let scanner = try await DBusConnection(bus: .address(harness.bus.address))
                try await harness.adapter(scanner, "StartDiscovery")
                #expect(harness.simulator.discoverySessions() == [scanner.uniqueName])
                await scanner.close()
                try await waitUntil("the session ends") { harness.simulator.discoverySessions().isEmpty }
            }
        }

        @Test func uncachedDevicesAppearThroughInterfacesAddedWhileDiscovering() async throws {
            var configuration = Harness.configuration(devices: 1)
            var hidden = [SimulatedDevice].sensors(count: 2)[1]
            hidden.cached = false
            configuration.devices.append(hidden)
            try await Harness.with(configuration) { harness in
                #expect(try await harness.objects()[Harness.devicePath(Harness.second)] == nil)
                let signals = try await harness.bluezSignals()
                try await harness.adapter(harness.client, "StartDiscovery")
                let received = try await collect(signals) { $0.addedPath == Harness.devicePath(Harness.second) }
                let added = try #require(received.last)
                let interfaces = try #require(added.arguments[1].dictionaryEntries)
                let device = interfaces.first { $0.key == .string("org.bluez.Device1") }?.value.dictionaryEntries
                #expect(device?.contains { $0.key == .string("RSSI") } == true)
                try await harness.adapter(harness.client, "StopDiscovery")
            }
        }

        @Test func discoveryOnAPoweredOffAdapterIsNotReady() async throws {
            try await Harness.with { harness in
                try await harness.simulator.setPowered(false)
                let error = await dbusError { try await harness.adapter(harness.client, "StartDiscovery") }
                #expect(error?.name == "org.bluez.Error.NotReady")
                #expect(error?.message == "Resource Not Ready")
            }
        }
    }

    @Suite struct Connection {
        @Test func connectSendsConnectedThenReplyThenGATTObjectsThenServicesResolved() async throws {
            try await Harness.with { harness in
                let monitor = try await WireMonitor(address: harness.bus.address)
                try await harness.connect()
                let sender = try #require(harness.simulator.uniqueName)
                let wire = try await monitor.stop(sender: sender, after: "\"ServicesResolved\"")
                let connected = try #require(wire.firstIndex { $0.contains("\"Connected\"") && $0.contains("true") })
                let reply = try #require(wire[connected...].firstIndex { $0 == "return" })
                let gatt = try #require(
                    wire.firstIndex { $0.hasPrefix("signal InterfacesAdded") && $0.contains("/service") })
                let resolved = try #require(
                    wire.firstIndex { $0.contains("\"ServicesResolved\"") && $0.contains("true") })
                #expect(connected < reply && reply < gatt && gatt < resolved, "wire order: \(wire)")
            }
        }

        @Test func gattObjectsHaveHandlePathsAndFlagsAndStayCachedAfterDisconnect() async throws {
            try await Harness.with { harness in
                try await harness.connect()
                let objects = try await harness.objects()
                let counter = try await harness.characteristic(Harness.counter)
                #expect(
                    counter.rawValue.range(of: #"/service[0-9a-f]{4}/char[0-9a-f]{4}$"#, options: .regularExpression)
                        != nil)
                let properties = try #require(objects[counter]?["org.bluez.GattCharacteristic1"])
                #expect(properties["Flags"] == .array(element: "s", [.string("read"), .string("notify")]))
                #expect(properties["Service"]?.objectPath == counter.parent)
                let descriptor = try #require(objects.first { $0.key.isDescendant(of: counter) })
                #expect(descriptor.key.rawValue.range(of: #"/desc[0-9a-f]{4}$"#, options: .regularExpression) != nil)
                #expect(descriptor.value["org.bluez.GattDescriptor1"]?["UUID"] == .string(SimulatedUUID.full("2902")))
                // The battery plugin adds Battery1, and bluetoothd 5.66 keeps the 0x180F service exported too.
                #expect(objects[Harness.devicePath(Harness.first)]?["org.bluez.Battery1"]?["Percentage"]?.byte != nil)
                #expect(
                    objects.values.contains {
                        $0["org.bluez.GattService1"]?["UUID"] == .string(SimulatedUUID.full("180F"))
                    })
                try await harness.device(harness.client, Harness.first, "Disconnect")
                try await waitUntil("Connected is false") {
                    try await harness.deviceProperty(Harness.first, "Connected") == .boolean(false)
                }
                #expect(try await harness.objects()[counter] != nil, "GATT objects stay cached")
                let notConnected = await dbusError { _ = try await harness.read(counter) }
                #expect(notConnected?.name == "org.bluez.Error.Failed" && notConnected?.message == "Not connected")
            }
        }

        /// bluetoothd 5.66 in the qemu lab: Battery1 goes at once, the reply comes ≈2 s later, then
        /// ServicesResolved=false and, ~6 ms after, Connected=false, in two PropertiesChanged.
        @Test func disconnectDropsBatteryThenRepliesThenUnresolvesThenDisconnects() async throws {
            try await Harness.with(Harness.configuration { $0.timeScale = 0.05 }) { harness in
                try await harness.connect()
                try await waitUntil("Battery1 is there") {
                    try await harness.objects()[Harness.devicePath(Harness.first)]?["org.bluez.Battery1"] != nil
                }
                let signals = try await harness.bluezSignals()
                let clock = ContinuousClock()
                let started = clock.now
                try await harness.device(harness.client, Harness.first, "Disconnect")
                #expect(clock.now - started >= .milliseconds(95), "Disconnect takes ≈2 s × 0.05")
                let received = try await collect(signals) { $0.changed["Connected"] == .boolean(false) }
                let batteryGone = received.firstIndex { $0.member == "InterfacesRemoved" }
                let unresolved = received.firstIndex { $0.changed["ServicesResolved"] == .boolean(false) }
                let disconnected = received.firstIndex { $0.changed["Connected"] == .boolean(false) }
                #expect(batteryGone != nil && unresolved != nil && disconnected != nil, "\(received.map(\.member))")
                if let batteryGone, let unresolved, let disconnected {
                    #expect(batteryGone < unresolved && unresolved < disconnected)
                }
                #expect(received.last?.changed["ServicesResolved"] == nil, "separate signals")
            }
        }

        @Test func aSecondConnectWhilePendingFailsAndDisconnectCancelsThePendingConnect() async throws {
            try await Harness.with(Harness.configuration { $0.latencies.connect = .seconds(30) }) { harness in
                let pending = Task {
                    await dbusError { try await harness.device(harness.client, Harness.first, "Connect") }
                }
                try await waitUntil("the connect is pending") { harness.simulator.callCounts["Connect"] == 1 }
                let second = await dbusError { try await harness.device(harness.client, Harness.first, "Connect") }
                #expect(second?.name == "org.bluez.Error.Failed" && second?.message == "Operation already in progress")
                try await harness.device(harness.client, Harness.first, "Disconnect")
                let canceled = await pending.value
                #expect(canceled?.name == "org.bluez.Error.Failed" && canceled?.message == "br-connection-canceled")
                #expect(harness.simulator.connectedDevices.isEmpty)
            }
        }

        @Test func theLinkStaysUpWhenTheClientThatConnectedLeavesTheBus() async throws {
            try await Harness.with { harness in
                let other = try await DBusConnection(bus: .address(harness.bus.address))
                try await harness.device(other, Harness.first, "Connect")
                try await harness.adapter(other, "StartDiscovery")
                await other.close()
                // The simulator has seen the client leave once its discovery session is gone.
                try await waitUntil("the departure is handled") { harness.simulator.discoverySessions().isEmpty }
                #expect(harness.simulator.connectedDevices == [Harness.first])
                #expect(try await harness.deviceProperty(Harness.first, "Connected") == .boolean(true))
            }
        }
    }
}
