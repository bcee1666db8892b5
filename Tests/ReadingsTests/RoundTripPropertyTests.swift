import Basics
import Testing
@testable import Readings

@Suite("Encode/decode round trip")
struct RoundTripPropertyTests {
    /// A random value the format can hold exactly.
    static func randomValue(for format: ValueFormat, using random: inout SplitMix64) -> Reading.Value? {
        switch format.representation {
        case .unsigned(let count, _):
            let bits = random.next()
            return .unsigned(count == 8 ? bits : bits & ((1 << UInt64(count * 8)) - 1))
        case .signed(let count, _):
            return .integer(ByteReader.signExtend(random.next(), bitWidth: count * 8))
        case .binary32:
            var value: Float
            repeat { value = Float(bitPattern: UInt32(truncatingIfNeeded: random.next())) } while !value.isFinite
            return .number(Double(value))
        case .binary64:
            var value: Double
            repeat { value = Double(bitPattern: random.next()) } while !value.isFinite
            return .number(value)
        case .medical16:
            let mantissa = Int32(Int64(random.next() % 4091) - 2045)
            let exponent = Int8(Int64(random.next() % 16) - 8)
            return .number(MedicalFloat(mantissa: mantissa, exponent: exponent).doubleValue)
        case .medical32:
            // Exponents kept within ±15 so that any re-expression the encoder picks stays within
            // the exactly-rounded powers of ten (10^22); beyond that equality is approximate.
            let mantissa = Int32(Int64(random.next() % 0xFF_FFFB) - 0x7F_FFFD)
            let exponent = Int8(Int64(random.next() % 31) - 15)
            return .number(MedicalFloat(mantissa: mantissa, exponent: exponent).doubleValue)
        case .text, .hex:
            return nil
        }
    }

    @Test func everyNumericFormatAtEveryOffset() throws {
        var random = SplitMix64(seed: 0x5EED_0001)
        var checked = 0
        for format in ValueFormat.allCases where format.isNumeric {
            for offset in 0...8 {
                for _ in 0..<25 {
                    guard let value = Self.randomValue(for: format, using: &random) else { continue }
                    let encoded = try format.encode(value)
                    #expect(encoded.count == format.byteCount)
                    let trailing = Int(random.next() % 9)
                    var buffer = random.bytes(count: offset + encoded.count + trailing)
                    buffer.replaceSubrange(offset..<(offset + encoded.count), with: encoded)
                    let reading = Decode.field(format, buffer, at: offset)
                    #expect(reading.value == value, "\(format) at \(offset): \(value) -> \(buffer)")
                    #expect(reading.error == nil)
                    checked += 1
                }
            }
        }
        #expect(checked == ValueFormat.allCases.filter(\.isNumeric).count * 9 * 25)
    }
}
