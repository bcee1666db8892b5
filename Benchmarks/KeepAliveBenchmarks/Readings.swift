import KeepAlive
import Polling
import KeepAliveDaemon
import Readings

// MARK: 5. Readings: decoding per reading, beside encoding a record's JSON line

/// CPU per decoded reading for each kind of decoding a poll meets, and CPU per record line with and without
/// readings, so the report can set the decoder's cost beside the writer's (and beside CPU per poll).
func benchmarkReadings(iterations: Int) -> [(name: String, nanosecondsPerReading: Double)] {
    let presentation = PresentationFormat(format: 0x0E, exponent: -2, unit: 0x272F, namespace: 1, description: 0)
    let plant = Layout(fields: [
        Field(
            name: "temperature", at: 0, format: .sint16le,
            scale: Scale(multiplier: 1, decimalExponent: -1, binaryExponent: 0), unit: "°C"),
        Field(name: "light", at: 3, format: .uint32le, unit: "lx"),
        Field(name: "moisture", at: 7, format: .uint8, unit: "%"),
        Field(name: "conductivity", at: 8, format: .uint16le, unit: "µS/cm"),
    ])
    let cases: [(String, [UInt8], CharacteristicDecoding)] = [
        ("battery 0x2A19 (SIG)", [51], .sig(0x2A19)),
        ("temperature 0x2A6E (SIG)", [0xCE, 0xFF], .sig(0x2A6E)),
        ("heart rate 0x2A37 (SIG, flags + RR)", [0x10, 72, 0x55, 0x03], .sig(0x2A37)),
        ("vendor value by its 0x2904", [0xDF, 0xF8], .presentation(presentation, name: "probe")),
        ("Mi Flora layout, 4 fields", [0xEA, 0, 0, 0xD2, 4, 0, 0, 0x29, 0x37, 2, 0, 0, 0, 0, 0, 0], .layout(plant)),
    ]
    var results: [(String, Double)] = []
    for (name, bytes, decoding) in cases {
        var count = 0
        let start = cpuTime()
        for _ in 0..<iterations {
            count &+= ReadingsDecoder.decode(bytes, as: decoding).count
        }
        let elapsed = cpuTime() - start
        results.append((name, microseconds(elapsed) * 1_000 / Double(max(count, 1))))
    }
    return results
}

/// CPU per JSON line of a record with two values, with and without their readings.
func benchmarkRecordLine(iterations: Int) -> (withReadings: Double, withoutReadings: Double) {
    let battery = BluetoothUUID(assigned: 0x2A19)
    let temperature = BluetoothUUID(assigned: 0x2A6E)
    let spec = PeripheralSpec(
        name: "greenhouse-north", peripheral: Peripheral(address: "C0:FF:EE:00:00:01", adapter: "hci0"),
        reads: [battery, temperature]
    )
    var record = PollRecord(
        device: spec.name, peripheral: spec.peripheral, tick: 7, scheduled: KeepAliveInstant(offset: .seconds(210)),
        fired: KeepAliveInstant(offset: .seconds(210)), result: .newData,
        values: [
            .init(characteristic: battery, bytes: [51]), .init(characteristic: temperature, bytes: [0x22, 0x08]),
        ],
        window: .init(
            id: BackgroundTaskID(rawValue: 12), budget: .seconds(20), used: .milliseconds(2_114), outcome: .completed),
        attempts: 1, interval: .seconds(30)
    )
    record.readings = spec.readings(values: record.values, notifications: [])
    var bare = record
    bare.readings = []
    func measure(_ record: PollRecord) -> Double {
        var bytes = 0
        let start = cpuTime()
        for sequence in 0..<iterations {
            bytes &+= RecordLine.line(for: record, sequence: UInt64(sequence)).utf8.count
        }
        let elapsed = cpuTime() - start
        return bytes > 0 ? microseconds(elapsed) * 1_000 / Double(iterations) : 0
    }
    return (measure(record), measure(bare))
}
