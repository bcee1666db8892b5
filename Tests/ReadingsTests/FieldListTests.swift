import Basics
import Testing

@testable import Readings

/// The compiled fields the advertisement decoders read with (``FieldList``) against the fields they are compiled
/// from: the same reading for the same bytes, for every field of every table, at every offset near the data's end
/// (so the missing-bytes errors are compared too) and on random bytes, all-zero and all-one bytes (so the "not
/// available" values and the flags' bits are).
@Suite("Advertisement field lists")
struct FieldListTests {
    static let tables: [(String, [AdvertisedField])] = [
        ("BTHome", BTHome.fieldList.fields),
        ("MiBeacon", MiBeacon.fieldList.fields),
        ("pvvx", PVVXFormats.customFields),
        ("ATC1441", PVVXFormats.atc1441Fields),
        ("Ruuvi", RuuviRAWv2.fields),
        (
            "edge cases",
            [
                .number("wide", .uint64be, unit: nil),
                .number("wide_signed", .sint64le, scale: .init(multiplier: 3), unit: nil),
                .number("offset", .uint32le, unit: "x", notAvailable: [0], rawOffset: -7),
                .number("scaled_offset", .uint16be, scale: .init(decimalExponent: -2), unit: nil, rawOffset: 9),
                .number("bits", .sint16le, unit: nil, notAvailable: [3], bits: .init(shift: 3, width: 4)),
                .number("two_specials", .uint8, unit: nil, notAvailable: [0, 1]),
                AdvertisedField("flag", at: 1, .flag(bit: 7)), AdvertisedField("boolean", at: 2, .boolean),
                AdvertisedField("float", .decimalFloat32(unit: "°C")), AdvertisedField("time", .timestamp),
                AdvertisedField(
                    "bounded",
                    .number(NumberDescription(format: .uint8, valid: ValidRange(minimum: 0, maximum: 10)))),
                AdvertisedField("float_number", .number(NumberDescription(format: .float32le, unit: "V"))),
                AdvertisedField("moved", .number(NumberDescription(format: .sint8, offset: 0.5))),
            ]
        ),
    ]

    static func reference(_ fields: [AdvertisedField], _ bytes: [UInt8], base: Int) -> [Reading] {
        fields.map { $0.reading(from: ByteReader(bytes), base: base) }
    }

    static func compiled(_ list: FieldList, _ bytes: [UInt8], base: Int) -> [Reading] {
        var readings: [Reading] = []
        list.appendReadings(from: bytes, base: base, to: &readings)
        return readings
    }

    /// Random inputs per table: 300 in the whole suite (its CPU-bound tests run on the test pool's threads, and on
    /// two cores 2,000 per table held both for seconds beside tests that wait on real time); CI's fuzz stage sets
    /// KEEPALIVE_FUZZ_ITERATIONS=100000, which makes 2,000. A tenth under ThreadSanitizer (`Sanitizers.rounds`).
    static var iterations: Int {
        Sanitizers.rounds(environment("KEEPALIVE_FUZZ_ITERATIONS").flatMap { Int($0) }.map { max(1, $0 / 50) } ?? 300)
    }

    @Test(arguments: tables.map(\.0))
    func compiledFieldsReadAsTheFieldsDo(_ table: String) {
        guard let fields = Self.tables.first(where: { $0.0 == table })?.1 else { return }
        let list = FieldList(fields)
        var random = SplitMix64(seed: 0xF1E1_D000)
        let longest = fields.map(\.end).max() ?? 0
        for iteration in 0..<Self.iterations {
            let length = Int(random.next() % UInt64(longest + 3))
            let bytes: [UInt8] =
                switch iteration % 4 {
                case 0: [UInt8](repeating: 0, count: length)
                case 1: [UInt8](repeating: 0xFF, count: length)
                default: (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                }
            for base in [0, 1, length / 2, max(0, length - 1)] {
                let expected = Self.reference(fields, bytes, base: base)
                let actual = Self.compiled(list, bytes, base: base)
                if actual != expected {
                    Issue.record("\(table) \(bytes) at \(base): \(actual) != \(expected)")
                    return
                }
            }
        }
    }

    @Test func aRangeReadsOnlyThoseFields() {
        let list = PVVXFormats.customFieldList
        let bytes = Array(0..<15).map(UInt8.init)
        var readings: [Reading] = []
        list.appendReadings(from: bytes, base: 0, to: &readings, range: 1..<3)
        #expect(readings == Self.reference(Array(PVVXFormats.customFields[1..<3]), bytes, base: 0))
    }
}
