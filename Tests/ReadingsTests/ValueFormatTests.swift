import Testing
@testable import Readings

@Suite("ValueFormat")
struct ValueFormatTests {
    /// Boundaries (0, max, min, -1) of every integer width in both byte orders.
    static let integerCases: [(ValueFormat, [UInt8], Reading.Value)] = [
        (.uint8, [0x00], .unsigned(0)), (.uint8, [0xFF], .unsigned(255)), (.uint8, [0x7F], .unsigned(127)),
        (.sint8, [0x00], .integer(0)), (.sint8, [0xFF], .integer(-1)), (.sint8, [0x7F], .integer(127)),
        (.sint8, [0x80], .integer(-128)),
        (.uint16le, [0x00, 0x00], .unsigned(0)), (.uint16le, [0xFF, 0xFF], .unsigned(65535)),
        (.uint16le, [0x34, 0x12], .unsigned(0x1234)),
        (.uint16be, [0x00, 0x00], .unsigned(0)), (.uint16be, [0xFF, 0xFF], .unsigned(65535)),
        (.uint16be, [0x12, 0x34], .unsigned(0x1234)),
        (.sint16le, [0xFF, 0xFF], .integer(-1)), (.sint16le, [0x00, 0x80], .integer(-32768)),
        (.sint16le, [0xFF, 0x7F], .integer(32767)),
        (.sint16le, [0x00, 0x00], .integer(0)), (.sint16le, [0xCE, 0xFF], .integer(-50)),
        (.sint16be, [0xFF, 0xFF], .integer(-1)), (.sint16be, [0x80, 0x00], .integer(-32768)),
        (.sint16be, [0x7F, 0xFF], .integer(32767)),
        (.sint16be, [0x00, 0x00], .integer(0)), (.sint16be, [0xFF, 0xCE], .integer(-50)),
        (.uint24le, [0x00, 0x00, 0x00], .unsigned(0)), (.uint24le, [0xFF, 0xFF, 0xFF], .unsigned(0xFF_FFFF)),
        (.uint24le, [0x56, 0x34, 0x12], .unsigned(0x12_3456)),
        (.uint24be, [0x00, 0x00, 0x00], .unsigned(0)), (.uint24be, [0xFF, 0xFF, 0xFF], .unsigned(0xFF_FFFF)),
        (.uint24be, [0x12, 0x34, 0x56], .unsigned(0x12_3456)),
        (.sint24le, [0xFF, 0xFF, 0xFF], .integer(-1)), (.sint24le, [0x00, 0x00, 0x80], .integer(-8_388_608)),
        (.sint24le, [0xFF, 0xFF, 0x7F], .integer(8_388_607)), (.sint24le, [0, 0, 0], .integer(0)),
        (.sint24be, [0xFF, 0xFF, 0xFF], .integer(-1)), (.sint24be, [0x80, 0x00, 0x00], .integer(-8_388_608)),
        (.sint24be, [0x7F, 0xFF, 0xFF], .integer(8_388_607)), (.sint24be, [0, 0, 0], .integer(0)),
        (.uint32le, [0, 0, 0, 0], .unsigned(0)), (.uint32le, [0xFF, 0xFF, 0xFF, 0xFF], .unsigned(0xFFFF_FFFF)),
        (.uint32le, [0x78, 0x56, 0x34, 0x12], .unsigned(0x1234_5678)),
        (.uint32be, [0, 0, 0, 0], .unsigned(0)), (.uint32be, [0xFF, 0xFF, 0xFF, 0xFF], .unsigned(0xFFFF_FFFF)),
        (.uint32be, [0x12, 0x34, 0x56, 0x78], .unsigned(0x1234_5678)),
        (.sint32le, [0xFF, 0xFF, 0xFF, 0xFF], .integer(-1)), (.sint32le, [0, 0, 0, 0x80], .integer(Int64(Int32.min))),
        (.sint32le, [0xFF, 0xFF, 0xFF, 0x7F], .integer(Int64(Int32.max))), (.sint32le, [0, 0, 0, 0], .integer(0)),
        (.sint32be, [0xFF, 0xFF, 0xFF, 0xFF], .integer(-1)), (.sint32be, [0x80, 0, 0, 0], .integer(Int64(Int32.min))),
        (.sint32be, [0x7F, 0xFF, 0xFF, 0xFF], .integer(Int64(Int32.max))), (.sint32be, [0, 0, 0, 0], .integer(0)),
        (.uint64le, [0, 0, 0, 0, 0, 0, 0, 0], .unsigned(0)),
        (.uint64le, Array(repeating: 0xFF, count: 8), .unsigned(.max)),
        (.uint64le, [8, 7, 6, 5, 4, 3, 2, 1], .unsigned(0x0102_0304_0506_0708)),
        (.uint64be, [0, 0, 0, 0, 0, 0, 0, 0], .unsigned(0)),
        (.uint64be, Array(repeating: 0xFF, count: 8), .unsigned(.max)),
        (.uint64be, [1, 2, 3, 4, 5, 6, 7, 8], .unsigned(0x0102_0304_0506_0708)),
        (.sint64le, Array(repeating: 0xFF, count: 8), .integer(-1)),
        (.sint64le, [0, 0, 0, 0, 0, 0, 0, 0x80], .integer(.min)),
        (.sint64le, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F], .integer(.max)),
        (.sint64le, Array(repeating: 0, count: 8), .integer(0)),
        (.sint64be, Array(repeating: 0xFF, count: 8), .integer(-1)),
        (.sint64be, [0x80, 0, 0, 0, 0, 0, 0, 0], .integer(.min)),
        (.sint64be, [0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], .integer(.max)),
        (.sint64be, Array(repeating: 0, count: 8), .integer(0)),
    ]

    @Test func integerBoundariesInBothByteOrders() {
        for (format, bytes, expected) in Self.integerCases {
            let reading = Decode.field(format, bytes)
            #expect(reading.value == expected, "\(format) \(bytes)")
            #expect(reading.error == nil, "\(format) \(bytes)")
        }
        // Every numeric format and both orders appear.
        let covered = Set(Self.integerCases.map(\.0))
        for format in ValueFormat.allCases where format.isInteger {
            #expect(covered.contains(format), "\(format) has no boundary case")
        }
    }

    @Test func binaryFloatsInBothByteOrders() {
        let cases: [(ValueFormat, [UInt8], Double)] = [
            (.float32le, [0x00, 0x00, 0xC0, 0x3F], 1.5), (.float32be, [0x3F, 0xC0, 0x00, 0x00], 1.5),
            (.float32le, [0x00, 0x00, 0x80, 0xBF], -1), (.float32be, [0x00, 0x00, 0x00, 0x00], 0),
            (.float32le, [0xFF, 0xFF, 0x7F, 0x7F], Double(Float.greatestFiniteMagnitude)),
            (.float32be, [0xFF, 0x7F, 0xFF, 0xFF], -Double(Float.greatestFiniteMagnitude)),
            (.float64le, [0, 0, 0, 0, 0, 0, 0xF8, 0x3F], 1.5), (.float64be, [0x3F, 0xF8, 0, 0, 0, 0, 0, 0], 1.5),
            (.float64le, [0, 0, 0, 0, 0, 0, 0xF0, 0xBF], -1), (.float64be, [0, 0, 0, 0, 0, 0, 0, 0], 0),
            (.float64le, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xEF, 0x7F], .greatestFiniteMagnitude),
            (.float64be, [0xFF, 0xEF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], -.greatestFiniteMagnitude),
        ]
        for (format, bytes, expected) in cases {
            #expect(Decode.field(format, bytes).value == .number(expected), "\(format) \(bytes)")
        }
    }

    @Test func binaryFloatNaNAndInfinitiesAreSpecials() {
        let cases: [(ValueFormat, [UInt8], String)] = [
            (.float32le, [0x00, 0x00, 0xC0, 0x7F], "NaN"), (.float32be, [0x7F, 0x80, 0x00, 0x00], "+INFINITY"),
            (.float32le, [0x00, 0x00, 0x80, 0xFF], "−INFINITY"),
            (.float64le, [0, 0, 0, 0, 0, 0, 0xF8, 0x7F], "NaN"),
            (.float64be, [0x7F, 0xF0, 0, 0, 0, 0, 0, 0], "+INFINITY"),
        ]
        for (format, bytes, meaning) in cases {
            let reading = Decode.field(format, bytes)
            #expect(reading.value == nil)
            #expect(reading.error?.code == .specialValue)
            #expect(reading.error?.message.contains(meaning) == true, "\(String(describing: reading.error))")
        }
    }

    @Test func everyFixedWidthFormatReportsAShortPayloadWithTheCounts() {
        for format in ValueFormat.allCases {
            guard let count = format.byteCount else { continue }
            let reading = Decode.field(format, Array(repeating: 0x01, count: count - 1))
            #expect(reading.value == nil, "\(format)")
            #expect(reading.error?.code == .payloadTooShort, "\(format)")
            let plural = count == 1 ? "byte" : "bytes"
            #expect(
                reading.error?.message == "needs \(count) \(plural) at offset 0, payload has \(count - 1)", "\(format)")
            // At an offset: the message names the offset.
            let shifted = Decode.field(format, Array(repeating: 0x01, count: count + 2), at: 3)
            #expect(
                shifted.error?.message == "needs \(count) \(plural) at offset 3, payload has \(count + 2)", "\(format)")
        }
    }

    @Test func textFormats() {
        #expect(Decode.field(.utf8, Array("Nordic".utf8) + [0, 0]).value == .text("Nordic"))
        #expect(Decode.field(.utf8, []).value == .text(""))
        #expect(Decode.field(.utf8, [0x68, 0xC3, 0xA9]).value == .text("hé"))
        #expect(Decode.field(.utf8, [0xC3]).error?.code == .invalidText)
        #expect(Decode.field(.hex, [0x00, 0xAB, 0x0F]).value == .text("00ab0f"))
        #expect(Decode.field(.hex, [0x01, 0x02], at: 1).value == .text("02"))
        #expect(Decode.field(.hex, [0x01], at: 2).error?.code == .payloadTooShort)
    }

    @Test func parsingEveryConfigurationSpelling() throws {
        for format in ValueFormat.allCases {
            #expect(try ValueFormat(parsing: format.rawValue) == format)
        }
        #expect(try ValueFormat(parsing: "sfloat") == .sfloat)
        #expect(try ValueFormat(parsing: "uint24le").byteCount == 3)
        #expect(ValueFormat.utf8.byteCount == nil && !ValueFormat.hex.isNumeric && ValueFormat.float.isNumeric)
    }

    @Test func parsingUnknownNamesFailsClearly() {
        for name in ["int16le", "", "UINT8", "uint16", "float16", "uint8 "] {
            #expect {
                _ = try ValueFormat(parsing: name)
            } throws: { error in
                guard let error = error as? ReadingError else { return false }
                return error.code == .unknownFormatName && error.message.contains("\"\(name)\"")
                    && error.message.contains("uint16le")
            }
        }
    }

    @Test func encodingRefusesWhatDoesNotFit() {
        #expect(throws: ReadingError.self) { try ValueFormat.uint8.encode(.unsigned(256)) }
        #expect(throws: ReadingError.self) { try ValueFormat.uint8.encode(.integer(-1)) }
        #expect(throws: ReadingError.self) { try ValueFormat.sint8.encode(.integer(128)) }
        #expect(throws: ReadingError.self) { try ValueFormat.sint16le.encode(.number(1.5)) }
        #expect(throws: ReadingError.self) { try ValueFormat.sfloat.encode(.number(.nan)) }
        #expect(throws: ReadingError.self) { try ValueFormat.sfloat.encode(.number(1e30)) }
        #expect(throws: ReadingError.self) { try ValueFormat.utf8.encode(.number(1)) }
        #expect(throws: ReadingError.self) { try ValueFormat.hex.encode(.text("zz")) }
        #expect((try? ValueFormat.sint16be.encode(.integer(-2))) == [0xFF, 0xFE])
        #expect((try? ValueFormat.uint24le.encode(.number(0x123456))) == [0x56, 0x34, 0x12])
        #expect((try? ValueFormat.hex.encode(.text("00aB"))) == [0x00, 0xAB])
        let encoded = try? ValueFormat.float.encode(.number(36.54))
        #expect(encoded.map { Decode.field(.float, $0).value } == .number(36.54))
        // SFLOAT keeps 4 digits at most: 36.54 becomes 36.5 (the nearest representable).
        #expect(
            (try? ValueFormat.sfloat.encode(.number(36.54))).map { Decode.field(.sfloat, $0).value } == .number(36.5))
    }
}
