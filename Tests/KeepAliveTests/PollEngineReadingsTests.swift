import KeepAlive
import Polling
import KeepAliveTesting
import Readings
import Testing

/// Records carry readings: values decoded by the SIG table, a configured layout or the 0x2904 descriptor, the
/// raw bytes kept beside them, and an undecodable value recorded with its reason.
@Suite("Poll engine readings")
struct PollEngineReadingsTests {
    let clock = TestClock()
    let battery = BluetoothUUID(assigned: 0x2A19)
    let temperature = BluetoothUUID(assigned: 0x2A6E)
    let probe = try! BluetoothUUID("4b410102-6b65-6570-616c-697665000000")
    let plant = try! BluetoothUUID("00001a01-0000-1000-8000-00805f9b34fb")
    let sensor = Peripheral(address: "AA:BB:CC:00:00:01", adapter: "hci0")

    func firstRecords(_ spec: PeripheralSpec, _ transport: MockTransport, ticks: Int = 1) async throws -> [PollRecord] {
        let keepAlive = try KeepAlive(configuration: .init(interval: .seconds(30)), clock: clock, logger: quietLogger)
        let engine = try PollEngine(
            peripherals: [spec], transport: transport, keepAlive: keepAlive, logger: quietLogger)
        let records = Collector(engine.records())
        return try await withRunning(keepAlive) {
            var collected = [try await records.next()]
            for tick in 1..<ticks {
                let instant = clock.instant(.seconds(30 * tick))
                try await clock.waitForSleeper(until: instant)
                clock.advance(to: instant)
                collected.append(try await records.next())
            }
            return collected
        }
    }

    @Test func standardCharacteristicsBecomeNumbersWithUnitsAndANegativeTemperatureStaysNegative() async throws {
        let transport = MockTransport(clock: clock)
        // 0xFFCE = −50 hundredths: the classic bug reads it as 655.18 °C.
        transport.add(sensor, characteristics: [battery: .fixed([51]), temperature: .fixed([0xCE, 0xFF])])
        let spec = PeripheralSpec(name: "greenhouse", peripheral: sensor, reads: [battery, temperature])
        let record = try #require(try await firstRecords(spec, transport).first)
        #expect(
            record.readings == [
                Reading(name: "battery", value: .unsigned(51), unit: "%"),
                Reading(name: "temperature", value: .number(-0.5), unit: "°C"),
            ])
        #expect(record.values.map(\.bytes) == [[51], [0xCE, 0xFF]], "the raw bytes stay")
    }

    @Test func aVendorValueIsDecodedByItsPresentationFormatAskedOncePerDevice() async throws {
        let transport = MockTransport(clock: clock)
        // sint16 (0x0E), exponent −2, degree Celsius (0x272F), SIG namespace: −18.25 °C as 0xF8DF.
        let descriptor: [UInt8] = [0x0E, 0xFE, 0x2F, 0x27, 0x01, 0x00, 0x00]
        transport.add(
            sensor, characteristics: [probe: .init(read: { _ in [0xDF, 0xF8] }, presentationFormat: descriptor)])
        let spec = PeripheralSpec(
            name: "probe", peripheral: sensor, reads: [probe], decoding: [probe: .init(name: "probe_temperature")])
        let records = try await firstRecords(spec, transport, ticks: 2)
        for record in records {
            #expect(record.readings == [Reading(name: "probe_temperature", value: .number(-18.25), unit: "°C")])
        }
        #expect(transport.presentationFormatReads(of: probe, on: sensor) == 1)
    }

    @Test func withoutADescriptorAVendorValueIsHexNamedByItsUUID() async throws {
        let transport = MockTransport(clock: clock)
        transport.add(sensor, characteristics: [probe: .fixed([0x04, 0x00])])
        let spec = PeripheralSpec(name: "probe", peripheral: sensor, reads: [probe])
        let record = try #require(try await firstRecords(spec, transport).first)
        #expect(record.readings == [Reading(name: probe.shortDescription, value: .text("0400"))])
    }

    @Test func aConfiguredLayoutDecodesEachFieldAndAShortPayloadIsRecordedNotGuessed() async throws {
        let layout = Layout(fields: [
            Field(name: "temperature", at: 0, format: .sint16le, scale: try Scale(parsing: "0.1"), unit: "°C"),
            Field(name: "light", at: 3, format: .uint32le, unit: "lx"),
            Field(name: "moisture", at: 7, format: .uint8, unit: "%"),
        ])
        let transport = MockTransport(clock: clock)
        let good: [UInt8] = [0xEA, 0x00, 0x00, 0xD2, 0x04, 0x00, 0x00, 0x29]
        transport.add(sensor, characteristics: [plant: .init(read: { $0 == 0 ? good : Array(good.prefix(5)) })])
        let spec = PeripheralSpec(
            name: "fern", peripheral: sensor, reads: [plant], decoding: [plant: .init(layout: layout)])
        let records = try await firstRecords(spec, transport, ticks: 2)
        #expect(records[0].readings.map(\.value) == [.number(23.4), .unsigned(1234), .unsigned(41)])
        #expect(records[0].readings.map(\.unit) == ["°C", "lx", "%"])
        let short = records[1].readings
        #expect(short[0].value == .number(23.4))
        #expect(short[1].value == nil && short[1].error?.code == .payloadTooShort, "\(short[1])")
        #expect(short[2].value == nil && short[2].error?.code == .payloadTooShort)
        #expect(records[1].values.first?.bytes.count == 5, "the raw bytes are still recorded")
    }

    @Test func aNotifiedCharacteristicGivesTheReadingsOfItsLastNotification() {
        let spec = PeripheralSpec(
            name: "room", peripheral: sensor, reads: [battery],
            notifications: [.init(characteristic: temperature, duration: .seconds(1))]
        )
        let readings = spec.readings(
            values: [PollRecord.Value(characteristic: battery, bytes: [80])],
            notifications: [
                PollRecord.Notification(characteristic: temperature, at: .at(.zero), bytes: [0x34, 0x08]),
                PollRecord.Notification(characteristic: temperature, at: .at(.seconds(1)), bytes: [0x35, 0x08]),
            ]
        )
        // 0x0835 = 2101 hundredths.
        #expect(
            readings == [
                Reading(name: "battery", value: .unsigned(80), unit: "%"),
                Reading(name: "temperature", value: .number(21.01), unit: "°C"),
            ])
    }
}
