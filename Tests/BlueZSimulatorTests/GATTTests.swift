import BlueZSimulator
import DBus
import LocalServices
import TestHarness
import Testing

extension BlueZSimulatorTests {
    @Suite struct GATT {
        @Test func readValueSendsTheValueChangeBeforeTheReply() async throws {
            try await Harness.with { harness in
                try await harness.connect()
                let counter = try await harness.characteristic(Harness.counter)
                let monitor = try await WireMonitor(address: harness.bus.address)
                let value = try await harness.read(counter)
                let wire = try await monitor.stop(
                    sender: try #require(harness.simulator.uniqueName), after: "method return")
                #expect(value == [0, 0, 0, 0])
                let change = try #require(
                    wire.firstIndex { $0.hasPrefix("signal PropertiesChanged \(counter)") && $0.contains("\"Value\"") })
                let reply = try #require(wire.firstIndex { $0 == "return" })
                #expect(change < reply, "wire order: \(wire)")
                #expect(try await harness.read(counter) == [1, 0, 0, 0])
            }
        }

        @Test func overlappingReadsShareOneAnswerAndAnotherOffsetIsInProgress() async throws {
            try await Harness.with(Harness.configuration { $0.latencies.read = .seconds(20) }) { harness in
                try await harness.connect()
                let counter = try await harness.characteristic(Harness.counter)
                let first = Task { try await harness.read(counter) }
                let second = Task { try await harness.read(counter) }
                try await waitUntil("both reads arrived") { harness.simulator.callCounts["ReadValue"] == 2 }
                let other = await dbusError { _ = try await harness.read(counter, offset: 1) }
                #expect(other?.name == "org.bluez.Error.InProgress")
                let answers = [try await first.value, try await second.value]
                #expect(answers[0] == answers[1])
                #expect(try await harness.read(counter) == [1, 0, 0, 0], "one ATT read served both")
            }
        }

        @Test func writeValueHonoursFlagsAndOptionTypes() async throws {
            try await Harness.with { harness in
                try await harness.connect()
                let setting = try await harness.characteristic(Harness.setting)
                try await harness.write(setting, [0x2A, 0x07], options: ["type": .string("request")])
                #expect(try await harness.read(setting) == [0x2A, 0x07])
                try await harness.write(setting, [0x05], options: ["type": .string("command")])
                #expect(try await harness.read(setting) == [0x05, 0x07])
                let badType = await dbusError { try await harness.write(setting, [1], options: ["type": .uint32(1)]) }
                #expect(badType?.name == "org.bluez.Error.InvalidArguments")
                let counter = try await harness.characteristic(Harness.counter)
                let notWritable = await dbusError { try await harness.write(counter, [1]) }
                #expect(
                    notWritable?.name == "org.bluez.Error.NotPermitted" && notWritable?.message == "Write not permitted"
                )
                let command = try await harness.characteristic(Harness.command)
                let notReadable = await dbusError { _ = try await harness.read(command) }
                #expect(
                    notReadable?.name == "org.bluez.Error.NotPermitted" && notReadable?.message == "Read not permitted")
            }
        }

        @Test func notificationsCountWithoutGapsAndSessionsSurviveADisconnect() async throws {
            try await Harness.with { harness in
                try await harness.connect()
                let counter = try await harness.characteristic(Harness.counter)
                let values = try await harness.client.signals(
                    matching: MatchRule(
                        path: counter, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged"))
                try await harness.characteristicCall(harness.client, counter, "StartNotify")
                let first = try await collect(values) { signal in
                    signal.changed["Value"].flatMap(\.bytes).map { $0.first == 3 } ?? false
                }
                let sequence = first.compactMap { $0.changed["Value"]?.bytes?.first }
                #expect(sequence == [0, 1, 2, 3], "no gaps: \(sequence)")
                try await harness.device(harness.client, Harness.first, "Disconnect")
                try await waitUntil("disconnected") { harness.simulator.connectedDevices.isEmpty }
                #expect(harness.simulator.notifySessions(counter) == [harness.client.uniqueName])
                try await harness.connect()
                let again = try await collect(values) { $0.changed["Value"]?.bytes?.first == 5 }
                #expect(again.compactMap { $0.changed["Value"]?.bytes?.first }.suffix(2) == [4, 5])
                try await harness.characteristicCall(harness.client, counter, "StopNotify")
                let stopAgain = await dbusError {
                    try await harness.characteristicCall(harness.client, counter, "StopNotify")
                }
                #expect(
                    stopAgain?.name == "org.bluez.Error.Failed" && stopAgain?.message == "No notify session started")
            }
        }

        @Test func startNotifyWhileDisconnectedStartsOnTheNextConnection() async throws {
            try await Harness.with { harness in
                try await harness.connect()
                let counter = try await harness.characteristic(Harness.counter)
                try await harness.device(harness.client, Harness.first, "Disconnect")
                try await waitUntil("disconnected") { harness.simulator.connectedDevices.isEmpty }
                let values = try await harness.client.signals(
                    matching: MatchRule(
                        path: counter, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged"))
                try await harness.characteristicCall(harness.client, counter, "StartNotify")
                try await harness.connect()
                let received = try await collect(values) { $0.changed["Value"] != nil }
                #expect(received.last?.changed["Value"]?.bytes == [0, 0, 0, 0])
            }
        }

        @Test func aNotifySessionEndsWhenItsClientLeavesTheBus() async throws {
            try await Harness.with { harness in
                try await harness.connect()
                let counter = try await harness.characteristic(Harness.counter)
                let listener = try await DBusConnection(bus: .address(harness.bus.address))
                try await harness.characteristicCall(listener, counter, "StartNotify")
                #expect(harness.simulator.notifySessions(counter) == [listener.uniqueName])
                await listener.close()
                try await waitUntil("the session ends") { harness.simulator.notifySessions(counter).isEmpty }
                #expect(
                    try await harness.client.getProperty(
                        "Notifying", interface: "org.bluez.GattCharacteristic1", destination: "org.bluez", path: counter
                    )
                        == .boolean(false))
            }
        }
    }
}
