import BlueZSimulator
import LibCrypto
import Readings
import Testing

/// The simulator's encoders against the project's own decoders (Sources/Readings/Advertisements): written apart, so
/// a wrong offset, scale, byte order or nonce on either side breaks the round trip.
extension BlueZSimulatorTests {
    @Suite struct AdvertisementEncoding {
        static let decoder = AdvertisementDecoder(cipher: LibCryptoAESCCM())
        static let addressText = "A4:C1:38:12:34:56"
        static let address = AdvertisementEncoder.addressBytes(addressText)!
        static let key = AdvertisementEncoder.keyBytes(SimulatedDevice.AdvertiserKey.bthomeEncrypted)!
        static let measurements = [
            SimulatedMeasurement(),
            SimulatedMeasurement(celsius: -12.34, humidity: 99.5, battery: 3, millivolts: 2_101, pressure: 955.37),
        ]

        static func decode(
            _ bytes: [UInt8], _ source: AdvertisementSource, key: [UInt8]? = nil, guard replay: inout ReplayGuard
        ) throws -> AdvertisementPayload {
            try decoder.decode(
                bytes, from: source, address: try BluetoothAddress(parsing: addressText),
                key: try key.map { try AdvertisementKey(bytes: $0) }, replayGuard: &replay)
        }

        static func value(_ payload: AdvertisementPayload, _ name: String) -> Double? {
            payload.readings.first { $0.name == name }?.value?.doubleValue
        }

        static func expectClose(_ actual: Double?, _ expected: Double, within tolerance: Double, _ what: String) {
            guard let actual else {
                Issue.record("no \(what)")
                return
            }
            #expect(abs(actual - expected) <= tolerance, "\(what): \(actual), expected \(expected)")
        }

        @Test(arguments: measurements) func bthomePlainRoundTrips(_ measurement: SimulatedMeasurement) throws {
            var replay = ReplayGuard()
            let bytes = AdvertisementEncoder.bthome(measurement, packetID: 42)
            #expect(bytes.first == 0x40)
            let payload = try Self.decode(bytes, .bthome, guard: &replay)
            #expect(payload.format == .bthome && !payload.isEncrypted && payload.packetID == 42)
            #expect(payload.issues.isEmpty)
            Self.expectClose(Self.value(payload, "temperature"), measurement.celsius, within: 0.005, "temperature")
            Self.expectClose(Self.value(payload, "humidity"), measurement.humidity, within: 0.005, "humidity")
            Self.expectClose(Self.value(payload, "battery"), Double(measurement.battery), within: 0, "battery")
            Self.expectClose(
                Self.value(payload, "voltage"), Double(measurement.millivolts) / 1000, within: 0.0005, "voltage")
        }

        @Test(arguments: measurements) func bthomeEncryptedRoundTripsWithItsKeyOnly(_ measurement: SimulatedMeasurement)
            throws
        {
            var replay = ReplayGuard()
            let bytes = try AdvertisementEncoder.bthomeEncrypted(
                measurement, packetID: 9, counter: 0x0102_0304, key: Self.key, address: Self.address)
            #expect(bytes.first == 0x41)
            #expect(Array(bytes.suffix(8).prefix(4)) == [0x04, 0x03, 0x02, 0x01], "the counter, little endian")
            let payload = try Self.decode(bytes, .bthome, key: Self.key, guard: &replay)
            #expect(payload.isEncrypted && payload.counter == 0x0102_0304 && payload.packetID == 9)
            Self.expectClose(Self.value(payload, "temperature"), measurement.celsius, within: 0.005, "temperature")
            Self.expectClose(Self.value(payload, "humidity"), measurement.humidity, within: 0.005, "humidity")
            // The same advertisement again is a repeat; another key does not authenticate.
            #expect(try Self.decode(bytes, .bthome, key: Self.key, guard: &replay).isRepeat)
            var fresh = ReplayGuard()
            var wrong = Self.key
            wrong[0] ^= 1
            #expect {
                try Self.decode(bytes, .bthome, key: wrong, guard: &fresh)
            } throws: { ($0 as? AdvertisementError)?.code == .authenticationFailed }
        }

        @Test(arguments: measurements) func pvvxRoundTrips(_ measurement: SimulatedMeasurement) throws {
            var replay = ReplayGuard()
            let bytes = AdvertisementEncoder.pvvx(measurement, count: 200, address: Self.address)
            #expect(bytes.count == 15)
            let payload = try Self.decode(bytes, .environmentalSensing, guard: &replay)
            #expect(payload.format == .pvvx && payload.packetID == 200)
            #expect(payload.advertisedAddress?.description == Self.addressText)
            Self.expectClose(Self.value(payload, "temperature"), measurement.celsius, within: 0.005, "temperature")
            Self.expectClose(Self.value(payload, "humidity"), measurement.humidity, within: 0.005, "humidity")
            Self.expectClose(Self.value(payload, "battery"), Double(measurement.battery), within: 0, "battery")
            Self.expectClose(
                Self.value(payload, "voltage"), Double(measurement.millivolts) / 1000, within: 0.0005, "voltage")
        }

        @Test(arguments: measurements) func miBeaconRoundTripsWithItsBindKey(_ measurement: SimulatedMeasurement) throws
        {
            var replay = ReplayGuard()
            let bindKey = AdvertisementEncoder.keyBytes(SimulatedDevice.AdvertiserKey.mibeacon)!
            let bytes = try AdvertisementEncoder.miBeacon(
                measurement, counter: 0x0000_0107, key: bindKey, address: Self.address)
            #expect(Array(bytes.prefix(4)) == [0x58, 0x58, 0x5B, 0x05], "frame control 0x5858, product 0x055B")
            let payload = try Self.decode(bytes, .mibeacon, key: bindKey, guard: &replay)
            #expect(payload.isEncrypted && payload.counter == 0x107 && payload.packetID == 0x07)
            #expect(payload.productID == 0x055B)
            #expect(payload.advertisedAddress?.description == Self.addressText)
            Self.expectClose(Self.value(payload, "temperature"), measurement.celsius, within: 0.05, "temperature")
            Self.expectClose(Self.value(payload, "humidity"), measurement.humidity, within: 0.05, "humidity")
            var fresh = ReplayGuard()
            #expect {
                try Self.decode(bytes, .mibeacon, key: Self.key, guard: &fresh)
            } throws: { ($0 as? AdvertisementError)?.code == .authenticationFailed }
        }

        @Test(arguments: measurements) func ruuviRAWv2RoundTrips(_ measurement: SimulatedMeasurement) throws {
            var replay = ReplayGuard()
            let bytes = AdvertisementEncoder.ruuviRAWv2(measurement, sequence: 0x1234, address: Self.address)
            #expect(bytes.count == 24 && bytes.first == 5)
            let payload = try Self.decode(bytes, .ruuvi, guard: &replay)
            #expect(payload.format == .ruuviRAWv2 && payload.packetID == 0x1234)
            #expect(payload.advertisedAddress?.description == Self.addressText)
            Self.expectClose(Self.value(payload, "temperature"), measurement.celsius, within: 0.0025, "temperature")
            Self.expectClose(Self.value(payload, "humidity"), measurement.humidity, within: 0.00125, "humidity")
            Self.expectClose(Self.value(payload, "pressure"), measurement.pressure, within: 0.005, "pressure")
            Self.expectClose(
                Self.value(payload, "acceleration_z"), Double(measurement.accelerationZ) / 1000, within: 0.0005,
                "acceleration z")
            Self.expectClose(
                Self.value(payload, "voltage"), Double(measurement.millivolts) / 1000, within: 0.0005, "voltage")
            Self.expectClose(Self.value(payload, "tx_power"), Double(measurement.txPower), within: 0, "tx power")
        }

        @Test func measurementsDriftAndRepeatsKeepTheirPacket() {
            let advertisement = SimulatedAdvertisement(kind: .bthome, repeats: 3)
            let temperatures = (0..<40).map { advertisement.measurement(UInt64($0)).celsius }
            #expect(Set(temperatures).count > 10, "the temperature drifts")
            #expect(temperatures.allSatisfy { $0 >= 21.5 && $0 <= 22.5 + 1e-9 })
            #expect(advertisement.measurement(0) != advertisement.measurement(1))
        }

        @Test func randomAdvertisersAreDeterministicDistinctAndKeyed() {
            let devices = [SimulatedDevice].randomAdvertisers(count: 500, seed: 3)
            #expect(devices.count == 500)
            #expect(Set(devices.map(\.address)).count == 500)
            #expect(devices.map(\.address) == [SimulatedDevice].randomAdvertisers(count: 500, seed: 3).map(\.address))
            #expect(devices.allSatisfy { AdvertisementEncoder.addressBytes($0.address).map { $0[0] >= 0xC0 } == true })
            #expect(!devices.contains { $0.address.hasPrefix("C0:FF:EE") })
            #expect(
                devices.allSatisfy {
                    guard let advertisement = $0.advertisement else { return false }
                    return advertisement.kind.isEncrypted == (advertisement.key?.count == 16)
                })
            #expect(Set(devices.compactMap(\.advertisement?.kind)) == Set(SimulatedAdvertisement.Kind.allCases))
        }
    }
}
