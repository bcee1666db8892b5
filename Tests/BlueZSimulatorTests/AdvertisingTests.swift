import BlueZ
import BlueZSimulator
import DBus
import LibCrypto
import LocalServices
import Logging
import Polling
import Readings
import TestHarness
import Testing

/// Passive sensors advertising over the private bus: what a BlueZ client receives, decoded with the project's own
/// decoders; DuplicateData; silence.
extension BlueZSimulatorTests {
    @Suite struct Advertising {
        typealias Address = SimulatedDevice.AdvertiserAddress
        static let sensors = [SimulatedDevice].advertisingSensors()
        static let decoder = AdvertisementDecoder(cipher: LibCryptoAESCCM())

        /// One ordinary sensor and the five passive ones, advertising every 5 s × 0.01 = 50 ms.
        static func configuration() -> BlueZSimulator.Configuration {
            Harness.configuration(devices: 1) { $0.devices += .advertisingSensors(interval: .seconds(5)) }
        }

        /// The payloads in an advertisement from one of `sensors`, decoded with its key.
        static func decode(_ advertisement: Advertisement, replay: inout ReplayGuard) throws -> [AdvertisementPayload] {
            let address = advertisement.peripheral.address
            let sensor = try #require(sensors.first { $0.address == address })
            let key = try sensor.advertisement?.keyHex.map { try AdvertisementKey(hex: $0) }
            let from = try BluetoothAddress(parsing: address)
            var sources: [(AdvertisementSource, [UInt8])] = advertisement.serviceData.compactMap { uuid, bytes in
                uuid.assignedNumber.map { (.serviceData(uuid16: $0), bytes) }
            }
            sources += advertisement.manufacturerData.map { (.manufacturerData(companyID: $0.key), $0.value) }
            return try sources.map { source, bytes in
                try decoder.decode(bytes, from: source, address: from, key: key, replayGuard: &replay)
            }
        }

        static func value(_ payload: AdvertisementPayload, _ name: String) -> Double? {
            payload.readings.first { $0.name == name }?.value?.doubleValue
        }

        /// A filter entry list for SetDiscoveryFilter.
        static func filter(duplicateData: Bool?) -> DBusValue {
            var entries = [DBusDictionaryEntry(key: .string("Transport"), value: .variant(.string("le")))]
            if let duplicateData {
                entries.append(
                    DBusDictionaryEntry(key: .string("DuplicateData"), value: .variant(.boolean(duplicateData))))
            }
            return .dictionary(key: "s", value: "v", entries)
        }

        /// Whether `signal` reports an advertisement of the device at `path`.
        static func sighted(_ signal: DBusSignal, _ path: ObjectPath) -> Bool {
            signal.addedPath == path || (signal.member == "PropertiesChanged" && signal.path == path)
        }

        static func control(_ harness: Harness, _ method: String, _ arguments: [DBusValue]) async throws -> [DBusValue]
        {
            try await harness.client.call(
                destination: BlueZSimulator.controlName, path: BlueZSimulator.controlPath,
                interface: BlueZSimulator.controlInterface, method: method, arguments: arguments)
        }

        @Test func aBlueZClientReceivesEveryKindAndItDecodesToPlausibleReadings() async throws {
            try await Harness.with(Self.configuration()) { harness in
                let connection = try await harness.bus.connect()
                let transport = BlueZTransport(
                    connection: connection, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
                let cache = Task { try await transport.run() }
                defer { cache.cancel() }
                try await transport.waitUntilReady(timeout: .seconds(10))
                let filter = DiscoveryFilter(duplicateData: true, addresses: Set(Self.sensors.map(\.address)))
                let received = try await withTimeout("every sensor advertised three measurements", .seconds(30)) {
                    var guards: [String: ReplayGuard] = [:]
                    var payloads: [String: [AdvertisementPayload]] = [:]
                    for try await advertisement in transport.discover(on: "hci0", filter: filter) {
                        let address = advertisement.peripheral.address
                        payloads[address, default: []] += try Self.decode(
                            advertisement, replay: &guards[address, default: ReplayGuard()])
                        let done = Self.sensors.allSatisfy { sensor in
                            Set(payloads[sensor.address]?.compactMap(\.packetID) ?? []).count >= 3
                        }
                        if done { break }
                    }
                    return payloads
                }
                #expect(Set(received.keys) == Set(Self.sensors.map(\.address)), "only the sensors asked for")
                for sensor in Self.sensors {
                    let payloads = try #require(received[sensor.address])
                    let advertisement = try #require(sensor.advertisement)
                    let base = advertisement.base
                    for payload in payloads {
                        let celsius = try #require(Self.value(payload, "temperature"))
                        let humidity = try #require(Self.value(payload, "humidity"))
                        #expect(celsius >= base.celsius - 0.05 && celsius <= base.celsius + 1.05, "\(sensor.address)")
                        #expect(humidity >= base.humidity - 0.05 && humidity <= base.humidity + 2.05)
                        #expect(payload.isEncrypted == advertisement.kind.isEncrypted)
                    }
                    // Measurements come in order, a new packet id for each; encrypted ones count up.
                    let ids = payloads.compactMap(\.packetID)
                    #expect(ids == ids.sorted(), "\(sensor.address): \(ids)")
                    if advertisement.kind.isEncrypted {
                        let counters = payloads.compactMap(\.counter)
                        #expect(counters.count == payloads.count && counters == counters.sorted())
                    }
                }
                let ruuvi = try #require(received[Address.ruuvi]?.first)
                #expect(Self.value(ruuvi, "pressure") == 1_002.5)
                let mibeacon = try #require(received[Address.mibeacon]?.first)
                #expect(mibeacon.productID == 0x055B)
                // The temperature drifts: BTHome's hundredths show each step.
                let bthome = Set(received[Address.bthome]?.compactMap { Self.value($0, "temperature") } ?? [])
                #expect(bthome.count >= 3)
            }
        }

        @Test(arguments: [true, false]) func duplicateDataReportsEveryAdvertisementOrOnlyChanges(_ duplicates: Bool)
            async throws
        {
            try await Harness.with(Self.configuration()) { harness in
                let signals = try await harness.bluezSignals()
                try await harness.adapter(
                    harness.client, "SetDiscoveryFilter", [Self.filter(duplicateData: duplicates)])
                try await harness.adapter(harness.client, "StartDiscovery")
                let path = Harness.devicePath(Address.pvvx)
                let (changes, data) = try await withTimeout("nine advertisements with data", .seconds(30)) {
                    var changes = 0
                    var data: [[UInt8]] = []
                    for try await signal in signals where signal.path == path && signal.member == "PropertiesChanged" {
                        changes += 1
                        // A filtered discovery reports every advertisement's RSSI, with its data in the same signal.
                        #expect(signal.changed["RSSI"]?.int16 != nil)
                        if let entries = signal.changed["ServiceData"]?.dictionaryEntries {
                            #expect(entries.count == 1)
                            #expect(entries.first?.key == .string("0000181a-0000-1000-8000-00805f9b34fb"))
                            data.append(try #require(entries.first?.value.unwrappingVariants.bytes))
                        }
                        if data.count == 9 { break }
                    }
                    return (changes, data)
                }
                let repeats = zip(data, data.dropFirst()).filter { $0 == $1 }.count
                if duplicates {
                    #expect(changes == data.count, "every advertisement carries its data")
                    #expect(repeats >= 4, "three advertisements per measurement: the repeats are reported")
                } else {
                    #expect(repeats == 0, "only changed data is reported")
                    #expect(changes > data.count, "the repeats still report their RSSI")
                }
                #expect(Set(data).count >= 3)
                try await harness.adapter(harness.client, "StopDiscovery")
            }
        }

        @Test func withoutAFilterTheRSSIOfRepeatsIsNotReported() async throws {
            try await Harness.with(Self.configuration()) { harness in
                let signals = try await harness.bluezSignals()
                try await harness.adapter(harness.client, "StartDiscovery")
                let path = Harness.devicePath(Address.bthome)
                let changed = try await withTimeout("four advertisements with data", .seconds(30)) {
                    var changed: [[String: DBusValue]] = []
                    for try await signal in signals where signal.path == path && signal.member == "PropertiesChanged" {
                        changed.append(signal.changed)
                        if changed.count == 4 { break }
                    }
                    return changed
                }
                // bluetoothd's 8 dBm threshold (the jitter is ±2 dBm): data changes only, once per measurement.
                #expect(changed.allSatisfy { $0.keys.sorted() == ["ServiceData"] })
                #expect(harness.simulator.advertisementsSent(Address.bthome) >= 3 * 4)
            }
        }

        @Test func aSensorFallsSilentAndSpeaksAgainThroughTheControlInterface() async throws {
            try await Harness.with(Self.configuration()) { harness in
                let simulator = harness.simulator
                let signals = try await harness.bluezSignals()
                try await harness.adapter(harness.client, "SetDiscoveryFilter", [Self.filter(duplicateData: true)])
                try await harness.adapter(harness.client, "StartDiscovery")
                let silent = Harness.devicePath(Address.bthome)
                let other = Harness.devicePath(Address.pvvx)
                try await waitUntil("BTHome advertised") { simulator.advertisementsSent(Address.bthome) >= 2 }
                _ = try await Self.control(harness, "SetAdvertising", [.string(Address.bthome), .boolean(false)])
                let frozen = simulator.advertisementsSent(Address.bthome)
                let target = simulator.advertisementsSent(Address.pvvx) + 6
                try await waitUntil("pvvx advertised six more times") {
                    simulator.advertisementsSent(Address.pvvx) >= target
                }
                #expect(simulator.advertisementsSent(Address.bthome) == frozen, "a silent sensor sends nothing")
                // With DuplicateData every advertisement is one signal (the first one the device's appearance), and
                // one sender's signals arrive in order: once pvvx's are all in, BTHome's are too.
                try await withTimeout("pvvx's signals arrive, then BTHome speaks again", .seconds(30)) {
                    var iterator = signals.makeAsyncIterator()
                    var counts = (silent: 0, other: 0)
                    while counts.other < Int(target), let signal = try await iterator.next() {
                        if Self.sighted(signal, silent) { counts.silent += 1 }
                        if Self.sighted(signal, other) { counts.other += 1 }
                    }
                    #expect(UInt64(counts.silent) == frozen)
                    _ = try await Self.control(harness, "SetAdvertising", [.string(Address.bthome), .boolean(true)])
                    while let signal = try await iterator.next() {
                        if Self.sighted(signal, silent) { break }
                    }
                }
                #expect(simulator.advertisementsSent(Address.bthome) > frozen)
            }
        }

        @Test func unconfiguredAdvertisersAreAddedThroughTheControlInterfaceAndAppear() async throws {
            try await Harness.with(Harness.configuration(devices: 1)) { harness in
                let options = DBusValue.dictionary(
                    key: "s", value: "v",
                    [
                        DBusDictionaryEntry(key: .string("rate"), value: .variant(.double(400))),
                        DBusDictionaryEntry(key: .string("seed"), value: .variant(.uint64(7))),
                    ])
                let reply = try await Self.control(harness, "AddAdvertisers", [.uint32(40), options])
                let entries = try #require(reply.first?.array)
                let addresses = entries.compactMap(\.string)
                #expect(Set(addresses).count == 40)
                try await harness.adapter(harness.client, "StartDiscovery")
                try await waitUntil("the 40 appear with their data") {
                    let objects = try await harness.objects()
                    return addresses.allSatisfy { address in
                        guard let device = objects[Harness.devicePath(address)]?["org.bluez.Device1"] else {
                            return false
                        }
                        return device["ServiceData"] != nil || device["ManufacturerData"] != nil
                    }
                }
                let objects = try await harness.objects()
                let devices = addresses.compactMap { objects[Harness.devicePath($0)]?["org.bluez.Device1"] }
                #expect(devices.count == 40)
                var decoded = 0
                for device in devices {
                    let address = try BluetoothAddress(parsing: try #require(device["Address"]?.string))
                    var sources: [(AdvertisementSource, [UInt8])] = []
                    for entry in device["ServiceData"]?.dictionaryEntries ?? [] {
                        let uuid = try BluetoothUUID(try #require(entry.key.string))
                        let bytes = try #require(entry.value.unwrappingVariants.bytes)
                        sources.append((.serviceData(uuid16: try #require(uuid.assignedNumber)), bytes))
                    }
                    for entry in device["ManufacturerData"]?.dictionaryEntries ?? [] {
                        let bytes = try #require(entry.value.unwrappingVariants.bytes)
                        sources.append((.manufacturerData(companyID: try #require(entry.key.uint16)), bytes))
                    }
                    #expect(sources.count == 1)
                    for (source, bytes) in sources {
                        #expect(AdvertisementDecoder.format(of: source, bytes: bytes) != nil)
                        var replay = ReplayGuard()
                        do {
                            let payload = try Self.decoder.decode(
                                bytes, from: source, address: address, replayGuard: &replay)
                            #expect(Self.value(payload, "temperature") != nil)
                            decoded += 1
                        } catch {
                            // Their keys are nobody's: an encrypted one asks for a key.
                            #expect((error as? AdvertisementError)?.code == .keyRequired)
                        }
                    }
                }
                #expect(decoded == 24, "three plain kinds of five: 24 of 40")
                #expect(harness.simulator.advertisementsSent >= 40)
            }
        }
    }
}
