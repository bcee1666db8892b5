import Basics
import BlueZSimulator
import KeepAliveDaemon
import KeepAliveTesting
import LibCrypto
import LocalServices
import Polling
import Readings
import TestHarness
import Testing
import YAML

/// `keepalive scan`'s decoding and `--suggest` (issue #36): advertisements from the published vectors (the same
/// ones Tests/ReadingsTests checks the decoders with) to the lines scan shows and the entries it suggests.
@Suite("scan: decoded advertisements and suggested entries")
struct ScanSuggestTests {
    static func bytes(_ hex: String) -> [UInt8] {
        Hex.bytes(hex.filter { !$0.isWhitespace }) ?? []
    }

    static func advertisement(
        _ address: String, name: String? = nil, services: [UInt16] = [], serviceData: [UInt16: String] = [:],
        manufacturerData: [UInt16: String] = [:]
    ) -> Advertisement {
        Advertisement(
            peripheral: Peripheral(address: address, adapter: "hci0"), name: name, rssi: -60,
            serviceUUIDs: services.map { BluetoothUUID(assigned: $0) },
            manufacturerData: manufacturerData.mapValues(bytes),
            serviceData: Dictionary(uniqueKeysWithValues: serviceData.map { (BluetoothUUID(assigned: $0), bytes($1)) }))
    }

    // The published vectors.
    /// bthome-ble test_bthome_packet_id_temperature_humidity_battery.
    static let bthome = advertisement(
        "A4:C1:38:8D:18:B2", name: "SBHT-003C", serviceData: [0xFCD2: "40 0009 015d 025d09 03b718"])
    /// bthome.io/encryption's example: key 231d39c1d7cc1ab1aee224cd096db932.
    static let bthomeEncrypted = advertisement(
        "54:48:E6:8F:80:A5", serviceData: [0xFCD2: "41 a47266c95f73 00112233 78237214"])
    static let bthomeKey = "231d39c1d7cc1ab1aee224cd096db932"
    /// pvvx's README, "Parsing a custom frame".
    static let pvvx = advertisement(
        "A4:C1:38:EE:C8:5C", name: "ATC_EEC85C", serviceData: [0x181A: "5cc8ee38c1a4 b008 c314 ca0a 50 14 05"])
    /// The atc1441 sample of pvvx's python-interface.
    static let atc = advertisement("A4:C1:38:AA:BB:CC", serviceData: [0x181A: "a4c138aabbcc 00ce 33 43 0a6e c3"])
    /// docs.ruuvi.com RAWv2 "valid data".
    static let ruuvi = advertisement(
        "CB:B8:33:4C:88:4F", name: "Ruuvi 884F",
        manufacturerData: [0x0499: "0512FC5394C37C0004FFFC040CAC364200CDCBB8334C884F"])
    /// xiaomi-ble test_Xiaomi_LYWSD03MMC_encrypted: product 0x055B, no key given.
    static let lywsd03mmcEncrypted = advertisement(
        "A4:C1:38:02:83:F4", name: "LYWSD03MMC",
        serviceData: [0xFE95: "5858 5b05 50 f4830238c1a4 95ef58763c 260000 97e2abb5"])
    /// xiaomi-ble test_Xiaomi_HHCCJCY01: a Mi Flora's plain MiBeacon, product 0x0098.
    static let miFlora = advertisement(
        "C4:7C:8D:6B:4F:F3", name: "Flower care", serviceData: [0xFE95: "7120 9800 12 f34f6b8d7cc4 0d 041002c400"])
    /// xiaomi-ble test_Xiaomi_CGG1: an encrypted MiBeacon 5 of another product (0x0B48).
    static let cgg1 = advertisement(
        "5A:58:2D:34:12:5F", serviceData: [0xFE95: "5858 480b 68 5f12342d585a 0b1841e2aa 000e00 a4964fb5"])

    static func lines(_ advertisement: Advertisement, keys: [String: AdvertisementKey] = [:]) -> [String] {
        let decoder = AdvertisementDecoder(cipher: keys.isEmpty ? nil : LibCryptoAESCCM())
        return ScanDecoding.decode(advertisement, decoder: decoder, keys: keys).map(ScanDecoding.line)
    }

    static func suggestion(_ advertisement: Advertisement) -> ScanSuggestion? {
        ScanSuggestions.suggestion(for: advertisement, payloads: ScanDecoding.decode(advertisement))
    }

    @Test func everyFormatDecodesToReadingsWithUnits() {
        #expect(Self.lines(Self.bthome) == ["BTHome: battery 93 %, temperature 23.97 °C, humidity 63.27 %"])
        #expect(
            Self.lines(Self.pvvx) == [
                "pvvx: temperature 22.24 °C, humidity 53.15 %, voltage 2.762 V, battery 80 %, reed_switch true, "
                    + "trigger_output false, trigger_output_controlled true, temperature_trigger false, "
                    + "humidity_trigger false"
            ])
        #expect(
            Self.lines(Self.atc).first?.hasPrefix("ATC1441: temperature 20.6 °C, humidity 51 %, battery 67 %") == true)
        #expect(
            Self.lines(Self.ruuvi).first?.hasPrefix(
                "Ruuvi RAWv2: temperature 24.3 °C, humidity 53.49 %, pressure 1000.44 hPa")
                == true)
        #expect(Self.lines(Self.miFlora) == ["MiBeacon: temperature 19.6 °C"])
    }

    @Test func encryptedAdvertisementsWithoutAKeySaySo() throws {
        #expect(Self.lines(Self.bthomeEncrypted) == ["BTHome (encrypted: key needed)"])
        #expect(Self.lines(Self.lywsd03mmcEncrypted) == ["MiBeacon (encrypted: bind key needed)"])
        // The header still tells the product and that it is encrypted.
        let payload = try #require(ScanDecoding.decode(Self.lywsd03mmcEncrypted).first)
        #expect(payload.productID == 0x055B)
        #expect(payload.isEncrypted)
        #expect(payload.outcome == .keyNeeded)
        #expect(
            ScanDecoding.json([payload])
                == "[{\"format\":\"mibeacon\",\"encrypted\":true,\"product_id\":1371,\"key_needed\":true}]")
    }

    @Test func aKeyGivenToScanDecrypts() throws {
        let key = try AdvertisementKey(hex: Self.bthomeKey)
        #expect(
            Self.lines(Self.bthomeEncrypted, keys: ["54:48:E6:8F:80:A5": key])
                == ["BTHome (encrypted): temperature 25.06 °C, humidity 50.55 %"])
        let wrong = try AdvertisementKey(hex: "814aac74c4f17b6c1581e1ab87816b99")
        #expect(
            Self.lines(Self.bthomeEncrypted, keys: ["54:48:E6:8F:80:A5": wrong])
                == ["BTHome (encrypted: the key given does not verify)"])
    }

    @Test func decodedFieldsInJSON() {
        let json = ScanDecoding.json(ScanDecoding.decode(Self.bthome))
        let readings = [
            "\"battery\":{\"value\":93,\"unit\":\"%\"}", "\"temperature\":{\"value\":23.97,\"unit\":\"°C\"}",
            "\"humidity\":{\"value\":63.27,\"unit\":\"%\"}",
        ]
        let expected =
            "[{\"format\":\"bthome\",\"encrypted\":false,\"readings\":{" + readings.joined(separator: ",") + "}}]"
        #expect(json == expected)
        #expect(ScanDecoding.decode(Self.advertisement("C0:FF:EE:00:00:01", name: "Sensor-001")).isEmpty)
    }

    @Test func suggestionsByAdvertisementFormat() {
        #expect(Self.suggestion(Self.bthome)?.source == .advertisements("bthome", keyNeeded: false))
        #expect(Self.suggestion(Self.bthomeEncrypted)?.source == .advertisements("bthome", keyNeeded: true))
        #expect(Self.suggestion(Self.pvvx)?.source == .advertisements("pvvx", keyNeeded: false))
        #expect(Self.suggestion(Self.atc)?.source == .advertisements("atc1441", keyNeeded: false))
        #expect(Self.suggestion(Self.ruuvi)?.source == .advertisements("ruuvi", keyNeeded: false))
        #expect(Self.suggestion(Self.cgg1)?.source == .advertisements("mibeacon", keyNeeded: true))
    }

    @Test func suggestionsByProductNameAndServices() {
        let flora = Self.suggestion(Self.miFlora)
        #expect(flora?.source == .profile("mi-flora"))
        #expect(flora?.alternative.contains("advertisements: mibeacon") == true)
        let lywsd = Self.suggestion(Self.lywsd03mmcEncrypted)
        #expect(lywsd?.source == .profile("lywsd03mmc"))
        #expect(lywsd?.alternative.suffix(2) == ["advertisements: mibeacon", "key: <32 hex>"])
        // By name alone (no advertisement data heard).
        #expect(
            Self.suggestion(Self.advertisement("C4:7C:8D:00:00:01", name: "Flower care"))?.source
                == .profile("mi-flora"))
        #expect(
            Self.suggestion(Self.advertisement("A4:C1:38:00:00:01", name: "LYWSD03MMC"))?.source
                == .profile("lywsd03mmc"))
        // By the services offered.
        let strap = Self.suggestion(Self.advertisement("C0:FF:EE:00:00:0D", name: "HRM", services: [0x180F, 0x180D]))
        #expect(strap?.source == .profile("heart-rate"))
        #expect(strap?.reads == ["2a19"])
        #expect(
            Self.suggestion(Self.advertisement("C0:FF:EE:00:00:09", services: [0x1809]))?.source
                == .profile("health-thermometer"))
        #expect(
            Self.suggestion(Self.advertisement("C0:FF:EE:00:00:1A", services: [0x181A]))?.source
                == .profile("environmental-sensing"))
        #expect(
            Self.suggestion(Self.advertisement("C0:FF:EE:00:00:0F", services: [0x180F]))?.source == .profile("battery"))
        // Nothing recognisable: no entry.
        #expect(Self.suggestion(Self.advertisement("C0:FF:EE:00:00:01", name: "Sensor-001", services: [0x1234])) == nil)
    }

    @Test func namesAreSlugsUniqueWithinTheOutput() {
        let names = ScanSuggestions.uniqueNames([
            ("LYWSD03MMC", "A4:C1:38:00:12:34"), ("LYWSD03MMC", "A4:C1:38:00:56:78"),
            ("Flower care", "C4:7C:8D:00:00:01"),
            (nil, "C0:FF:EE:00:00:01"), ("~~~", "C0:FF:EE:00:00:02"), ("yes", "C0:FF:EE:00:00:03"),
            ("1234", "C0:FF:EE:00:00:04"),
            ("a b", "C0:FF:EE:00:00:05"), ("a-b", "C0:FF:EE:00:00:06"),
        ])
        #expect(
            names == [
                "lywsd03mmc-1234", "lywsd03mmc-5678", "flower-care", "device-c0ffee000001", "device-c0ffee000002",
                "device-yes", "device-1234", "a-b-0005", "a-b-0006",
            ])
    }

    /// All the suggestions at once: YAML that, under `devices:`, the loader accepts once the keys are filled in.
    @Test func theSuggestionsAreYAMLTheLoaderAccepts() throws {
        let all = [
            Self.bthome, Self.bthomeEncrypted, Self.pvvx, Self.atc, Self.ruuvi, Self.lywsd03mmcEncrypted,
            Self.miFlora, Self.cgg1, Self.advertisement("C0:FF:EE:00:00:0D", name: "HRM", services: [0x180D, 0x180F]),
        ].compactMap(Self.suggestion)
        #expect(all.count == 9)
        let yaml = ScanSuggestions.yaml(all)
        #expect(yaml.contains("    advertisements: bthome\n    key: <32 hex>  # needed: encrypted\n"))
        #expect(
            yaml.contains(
                "  - name: lywsd03mmc\n    address: A4:C1:38:02:83:F4\n    adapter: hci0\n    profile: lywsd03mmc\n"))
        #expect(yaml.contains("    # advertisements: mibeacon\n    # key: <32 hex>\n"))
        guard case .mapping(let root) = try #require(try YAMLDocument.root(of: "devices:\n" + yaml)),
            case .sequence(let devices) = root[0].value
        else {
            Issue.record("not a mapping with a list of devices:\n\(yaml)")
            return
        }
        #expect(devices.count == 9)
        var names: Set<String> = []
        for device in devices {
            guard case .mapping(let entry) = device else { continue }
            let fields = Dictionary(
                entry.map { pair -> (String, String) in
                    guard case .scalar(let key) = pair.key, case .scalar(let value) = pair.value else {
                        return ("", "")
                    }
                    return (key.string, value.string)
                }, uniquingKeysWith: { first, _ in first })
            #expect(fields["address"]?.count == 17)
            #expect(fields["adapter"] == "hci0")
            #expect(fields["advertisements"] != nil || fields["profile"] != nil, "\(fields)")
            names.insert(fields["name"] ?? "")
        }
        #expect(names.count == 9)

        // Pasted with the keys filled in, every entry loads; with a placeholder left, the file is refused there.
        let pasted = yaml.replacing("<32 hex>", with: "231d39c1d7cc1ab1aee224cd096db932")
        let configuration = try ConfigurationLoader.parse("devices:\n" + pasted, file: "suggested.yaml")
        #expect(configuration.devices.count == 9)
        #expect(configuration.devices.compactMap(\.profile) == ["lywsd03mmc", "mi-flora", "heart-rate"])
        #expect(configuration.devices.filter { $0.advertising != nil }.count == 6)
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.parse("devices:\n" + yaml, file: "suggested.yaml")
        }
    }

    /// Through a transport: a discovery running while a BTHome sensor and a pvvx one advertise (the pvvx one
    /// twice, its second advertisement the newer reading), then what scan shows and suggests.
    @Test func aSurveyOverAMockTransport() async throws {
        let transport = MockTransport()
        let survey = ScanSurvey()
        let heard = Locked(0)
        // A scan longer than the test, ended by cancelling it once everything was heard: no real-time bound that a
        // loaded machine could miss.
        let listening = Task {
            try await survey.listen(to: transport, on: "hci0", for: .seconds(600)) { _ in heard.withLock { $0 += 1 } }
        }
        try await Self.waitUntil("the scan listens") { transport.listeners(on: "hci0") == 1 }
        #expect(transport.advertise(Self.bthomeEncrypted) == 1)
        var older = Self.pvvx
        older.serviceData[BluetoothUUID(assigned: 0x181A)] = Self.bytes("ccbbaa38c1a4 7707 8813 ca0a 50 01 07")
        _ = transport.advertise(older)
        _ = transport.advertise(Self.pvvx)
        // Elsewhere: another adapter's sighting is not this scan's.
        var other = Self.ruuvi
        other.peripheral.adapter = "hci1"
        #expect(transport.advertise(other) == 0)
        try await Self.waitUntil("three advertisements are heard") { heard.withLock { $0 } == 3 }
        listening.cancel()
        _ = await listening.result
        try await Self.waitUntil("the discovery stopped with the scan") { transport.listeners(on: "hci0") == 0 }
        #expect(heard.withLock { $0 } == 3)

        let devices = survey.devices
        #expect(devices.map(\.advertisement.peripheral.address) == ["54:48:E6:8F:80:A5", "A4:C1:38:EE:C8:5C"])
        #expect(devices.map(\.sightings) == [1, 2])
        #expect(
            ScanDecoding.decode(devices[1].advertisement).map(ScanDecoding.line).first?.hasPrefix(
                "pvvx: temperature 22.24 °C") == true)
        let yaml = ScanSuggestions.yaml(devices.compactMap { Self.suggestion($0.advertisement) })
        let pvvx = [
            "temperature 22.24 °C", "humidity 53.15 %", "voltage 2.762 V", "battery 80 %", "reed_switch true",
            "trigger_output false", "trigger_output_controlled true", "temperature_trigger false",
            "humidity_trigger false",
        ]
        #expect(
            yaml.split(separator: "\n") == [
                "  # heard BTHome (encrypted: key needed)",
                "  - name: device-5448e68f80a5",
                "    address: 54:48:E6:8F:80:A5",
                "    adapter: hci0",
                "    advertisements: bthome",
                "    key: <32 hex>  # needed: encrypted",
                "  # heard pvvx: " + pvvx.joined(separator: ", "),
                "  - name: atc-eec85c",
                "    address: A4:C1:38:EE:C8:5C",
                "    adapter: hci0",
                "    advertisements: pvvx",
            ])
    }

    /// Polls `condition` every few milliseconds until it holds (60 s of real time at most, for a loaded machine;
    /// three times that under a sanitizer).
    static func waitUntil(_ what: String, _ condition: () -> Bool) async throws {
        let giveUp = ContinuousClock.now + .seconds(60) * Sanitizers.slowdown
        while !condition() {
            guard ContinuousClock.now < giveUp else {
                Issue.record("timed out waiting until \(what)")
                return
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}

/// `keepalive scan` end to end: the built binary against the simulator, whose sensors advertise the vectors.
@Suite("keepalive scan: decoding and --suggest against the simulator")
struct ScanEndToEndTests {
    static func withSensors<T: Sendable>(_ body: @Sendable (PrivateBus) async throws -> T) async throws -> T {
        try await PrivateBus.with { bus in
            let battery = SimulatedService(
                uuid: "180f",
                characteristics: [SimulatedCharacteristic(uuid: "2a19", flags: ["read"], value: .batteryLevel(80))])
            let configuration = BlueZSimulator.Configuration(
                adapters: ["hci0"],
                devices: [
                    SimulatedDevice(
                        address: "A4:C1:38:8D:18:B2", name: "SBHT-003C",
                        serviceData: ["fcd2": ScanSuggestTests.bytes("40 0009 015d 025d09 03b718")]),
                    SimulatedDevice(
                        address: "A4:C1:38:02:83:F4", name: "LYWSD03MMC",
                        serviceData: [
                            "fe95": ScanSuggestTests.bytes("5858 5b05 50 f4830238c1a4 95ef58763c 260000 97e2abb5")
                        ]),
                    SimulatedDevice(address: "C0:FF:EE:00:00:0F", name: "Bank", services: [battery]),
                    SimulatedDevice(address: "C0:FF:EE:00:00:01", name: "Sensor-001"),
                ])
            let simulator = try await BlueZSimulator.start(on: .address(bus.address), configuration: configuration)
            do {
                let result = try await body(bus)
                await simulator.stop()
                return result
            } catch {
                await simulator.stop()
                throw error
            }
        }
    }

    @Test func jsonLinesCarryTheDecodedReadings() async throws {
        try await Self.withSensors { bus in
            let result = try await CommandProcess.run([
                "scan", "--bus", bus.address, "--timeout", "\(sanitizerSlowdown)s", "--json",
            ])
            #expect(result.status == 0, "\(result.stderr)")
            let lines = result.stdout.split(separator: "\n")
            let bthome = try #require(lines.first { $0.contains("\"address\":\"A4:C1:38:8D:18:B2\"") })
            #expect(bthome.contains("\"service_data\":[{\"uuid\":\"fcd2\",\"hex\":\"400009015d025d0903b718\"}]"))
            #expect(
                bthome.contains(
                    "\"decoded\":[{\"format\":\"bthome\",\"encrypted\":false,\"readings\":{\"battery\":{\"value\":93,"))
            let xiaomi = try #require(lines.first { $0.contains("\"address\":\"A4:C1:38:02:83:F4\"") })
            #expect(xiaomi.contains("\"key_needed\":true"))
            // Other devices keep the line they had.
            let plain = try #require(lines.first { $0.contains("\"address\":\"C0:FF:EE:00:00:01\"") })
            #expect(!plain.contains("decoded"))
        }
    }

    @Test func suggestPrintsEntriesForTheRecognisedSensors() async throws {
        try await Self.withSensors { bus in
            let result = try await CommandProcess.run([
                "scan", "--bus", bus.address, "--timeout", "\(sanitizerSlowdown)s", "--suggest",
            ])
            #expect(result.status == 0, "\(result.stderr)")
            let output = result.stdout
            #expect(output.hasPrefix("# 4 devices heard on hci0, 3 recognised."), "\(output)")
            #expect(
                output.contains(
                    "  - name: sbht-003c\n    address: A4:C1:38:8D:18:B2\n    adapter: hci0\n"
                        + "    advertisements: bthome\n"))
            #expect(
                output.contains(
                    "  - name: lywsd03mmc\n    address: A4:C1:38:02:83:F4\n    adapter: hci0\n    profile: lywsd03mmc\n"
                ))
            #expect(
                output.contains(
                    "  - name: bank\n    address: C0:FF:EE:00:00:0F\n    adapter: hci0\n    profile: battery\n"))
            #expect(!output.contains("C0:FF:EE:00:00:01"))
            #expect(try YAMLDocument.root(of: "devices:\n" + output) != nil)
        }
    }

    @Test func badKeysAreRefusedWithoutEchoingThem() async throws {
        let result = try await CommandProcess.run([
            "scan", "--bus", "unix:path=/nonexistent", "--key", "A4:C1:38:8D:18:B2=0123456789abcdef",
        ])
        #expect(result.status == 64)
        #expect(result.stderr.contains("a key is 32 hexadecimal digits"), "\(result.stderr)")
        #expect(!result.stderr.contains("0123456789abcdef"))
    }
}
