import Testing
@testable import Readings

@Suite("IEEE-11073 SFLOAT and FLOAT")
struct MedicalFloatTests {
    @Test func sfloatSpecialsAreNamed() {
        let cases: [([UInt8], String)] = [
            ([0xFF, 0x07], "0x07FF: NaN"), ([0x00, 0x08], "0x0800: NRes"), ([0xFE, 0x07], "0x07FE: +INFINITY"),
            ([0x02, 0x08], "0x0802: −INFINITY"), ([0x01, 0x08], "0x0801: reserved"),
        ]
        for (bytes, prefix) in cases {
            let reading = Decode.field(.sfloat, bytes)
            #expect(reading.value == nil)
            #expect(reading.error?.code == .specialValue)
            #expect(reading.error?.message.hasPrefix(prefix) == true, "\(String(describing: reading.error))")
        }
    }

    @Test func floatSpecialsAreNamed() {
        let cases: [([UInt8], String)] = [
            ([0xFF, 0xFF, 0x7F, 0x00], "0x007FFFFF: NaN"), ([0x00, 0x00, 0x80, 0x00], "0x00800000: NRes"),
            ([0xFE, 0xFF, 0x7F, 0x00], "0x007FFFFE: +INFINITY"), ([0x02, 0x00, 0x80, 0x00], "0x00800002: −INFINITY"),
            ([0x01, 0x00, 0x80, 0x00], "0x00800001: reserved"),
        ]
        for (bytes, prefix) in cases {
            let reading = Decode.field(.float, bytes)
            #expect(reading.value == nil)
            #expect(reading.error?.code == .specialValue)
            #expect(reading.error?.message.hasPrefix(prefix) == true, "\(String(describing: reading.error))")
        }
    }

    @Test func sfloatExactValues() {
        let cases: [([UInt8], Double)] = [
            ([0xD2, 0xE4], 12.34),  // mantissa 1234, exponent -2: divided, so exactly the Double nearest 12.34
            ([0xFF, 0x0F], -1),  // mantissa -1, exponent 0
            ([0x00, 0x00], 0),
            ([0xFD, 0x07], 2045),  // the largest mantissa that is not a special
            ([0x03, 0x08], -2045),
            ([0xFF, 0x17], 20470),  // 0x7FF is only NaN with exponent 0
            ([0x01, 0x80], 1e-8),  // smallest exponent
            ([0xFD, 0x77], 2045e7),  // largest
        ]
        for (bytes, expected) in cases {
            #expect(Decode.field(.sfloat, bytes).value == .number(expected), "\(bytes)")
        }
        // 0xFF9C: exponent 0xF = -1, mantissa 0xF9C = -100: -10.0.
        #expect(Decode.field(.sfloat, [0x9C, 0xFF]).value == .number(-10))
    }

    @Test func floatExactValues() {
        // Mantissa 3654, exponent -2: the Double nearest 36.54, not 3654 × 0.01.
        #expect(Decode.field(.float, [0x46, 0x0E, 0x00, 0xFE]).value == .number(36.54))
        #expect(Decode.field(.float, [0xFF, 0xFF, 0xFF, 0x00]).value == .number(-1))
        #expect(Decode.field(.float, [0xFD, 0xFF, 0x7F, 0x00]).value == .number(8_388_605))
        #expect(Decode.field(.float, [0x03, 0x00, 0x80, 0x00]).value == .number(-8_388_605))
        // Beyond 10^22 the power is applied in steps: close, not necessarily the nearest Double.
        let tiny = Decode.field(.float, [0x01, 0x00, 0x00, 0x80]).value?.doubleValue ?? 0
        #expect(abs(tiny / 1e-128 - 1) < 1e-14)
        let huge = Decode.field(.float, [0x01, 0x00, 0x00, 0x7F]).value?.doubleValue ?? 0
        #expect(abs(huge / 1e127 - 1) < 1e-14)
        // Exponent 1 with a "special" mantissa is an ordinary number.
        #expect(Decode.field(.float, [0xFF, 0xFF, 0x7F, 0x01]).value == .number(83_886_070))
    }

    @Test func bitsRoundTrip() throws {
        let number = try MedicalFloat(sfloatBits: 0xE4D2)
        #expect(number == MedicalFloat(mantissa: 1234, exponent: -2))
        #expect(number.sfloatBits == 0xE4D2)
        #expect(MedicalFloat(mantissa: 2047, exponent: 0).sfloatBits == nil)  // NaN's spot
        #expect(MedicalFloat(mantissa: 2048, exponent: 0).sfloatBits == nil)  // does not fit
        #expect(MedicalFloat(mantissa: 1, exponent: 8).sfloatBits == nil)
        #expect(MedicalFloat(mantissa: 0x7F_FFFF, exponent: 0).floatBits == nil)
        #expect(MedicalFloat(mantissa: 3654, exponent: -2).floatBits == 0xFE00_0E46)
    }
}
