import Testing
@testable import Readings

@Suite("Configured layouts")
struct LayoutTests {
    static let sensor = Layout(
        fields: [
            Field(name: "temperature", at: 0, format: .sint16le, scale: Scale(decimalExponent: -2), unit: "°C"),
            Field(name: "humidity", at: 2, format: .uint8, unit: "%", valid: ValidRange(0...100)),
            Field(name: "raw_offset", at: 3, format: .uint8, offset: -40, unit: "°C"),
            Field(name: "pressure", at: 4, format: .uint24be, scale: Scale(multiplier: 2), unit: "Pa"),
            Field(name: "label", at: 7, format: .utf8),
        ], size: 12)

    @Test func decodesScaleOffsetAndText() {
        let readings = ReadingsDecoder.decode(
            [0x6A, 0x08, 55, 60, 0x00, 0xC5, 0xD6] + Array("room".utf8), as: .layout(Self.sensor))
        #expect(
            readings == [
                Reading(name: "temperature", value: .number(21.54), unit: "°C"),
                Reading(name: "humidity", value: .unsigned(55), unit: "%"),
                Reading(name: "raw_offset", value: .number(20), unit: "°C"),
                Reading(name: "pressure", value: .number(101_292), unit: "Pa"),
                Reading(name: "label", value: .text("room")),
            ])
        #expect(Self.sensor.validate().isEmpty)
    }

    @Test func outOfRangeKeepsTheNumberInTheMessage() {
        let readings = ReadingsDecoder.decode([0x6A, 0x08, 101, 60, 0, 0, 0], as: .layout(Self.sensor))
        let humidity = Decode.named(readings, "humidity")
        #expect(humidity?.value == nil)
        #expect(humidity?.error == ReadingError(.outOfRange, "101.0 % is outside the valid range 0.0…100.0 %"))
    }

    @Test func fieldsBeyondOrBeforeThePayloadAreTypedErrors() {
        let layout = Layout(fields: [
            Field(name: "far", at: 1_000, format: .uint16le),
            Field(name: "huge", at: .max, format: .uint64be),
            Field(name: "negative", at: -1, format: .uint8),
            Field(name: "text_far", at: 50, format: .utf8),
        ])
        let readings = ReadingsDecoder.decode([1, 2, 3], as: .layout(layout))
        #expect(readings[0].error == .payloadTooShort(needs: 2, at: 1_000, has: 3))
        #expect(readings[1].error?.code == .payloadTooShort)
        #expect(readings[2].error?.code == .invalidLayout)
        #expect(readings[3].error?.code == .payloadTooShort)
        #expect(readings.allSatisfy { $0.value == nil })
    }

    @Test func fieldValidation() {
        let cases: [(Field, String)] = [
            (Field(name: "a", at: -1, format: .uint8), "offset -1 is negative"),
            (Field(name: "b", at: 0, format: .utf8, unit: "°C"), "a unit makes no sense on a utf8 field"),
            (
                Field(name: "c", at: 0, format: .hex, scale: Scale(decimalExponent: -1)),
                "a scale makes no sense on a hex field"
            ),
            (Field(name: "d", at: 0, format: .hex, offset: 1), "an offset makes no sense"),
            (Field(name: "e", at: 0, format: .utf8, valid: ValidRange(0...1)), "a valid range makes no sense"),
            (
                Field(name: "f", at: 0, format: .uint8, valid: ValidRange(minimum: 5, maximum: 1)),
                "minimum 5.0 is not at most maximum 1.0"
            ),
            (Field(name: "g", at: 0, format: .uint8, valid: ValidRange(minimum: .nan, maximum: 1)), "minimum nan"),
            (
                Field(name: "h", at: 0, format: .uint8, scale: Scale(multiplier: .infinity)),
                "not a finite non-zero number"
            ),
            (Field(name: "i", at: 0, format: .uint8, offset: .nan), "offset nan is not finite"),
            (Field(name: "", at: 0, format: .uint8), "the name is empty"),
        ]
        for (field, message) in cases {
            let errors = field.validate()
            #expect(errors.count == 1, "\(field.name): \(errors)")
            #expect(errors.first?.code == .invalidLayout)
            #expect(errors.first?.message.contains(message) == true, "\(errors)")
        }
        #expect(
            Field(name: "ok", at: 3, format: .sfloat, scale: Scale(decimalExponent: 2), offset: -1, unit: "V")
                .validate().isEmpty)
    }

    @Test func layoutValidation() {
        let duplicate = Layout(fields: [
            Field(name: "x", at: 0, format: .uint8), Field(name: "x", at: 1, format: .uint8),
        ])
        #expect(duplicate.validate().map(\.message) == ["field name \"x\" is used more than once"])
        let pastSize = Layout(
            fields: [Field(name: "x", at: 3, format: .uint16le), Field(name: "t", at: 5, format: .utf8)], size: 4)
        #expect(
            pastSize.validate().map(\.message) == [
                "field \"x\" needs 2 bytes at offset 3, past the size 4",
                "field \"t\" needs 0 bytes at offset 5, past the size 4",
            ])
        #expect(Layout(fields: [Field(name: "x", at: 2, format: .uint16le)], size: 4).validate().isEmpty)
        #expect(Layout(fields: []).validate().count == 1)
        #expect(Layout(fields: [Field(name: "x", at: 0, format: .uint8)], size: -1).validate().count == 1)
    }
}

@Suite("Presentation format and precedence")
struct PresentationFormatTests {
    @Test func parsesTheDescriptor() throws {
        let format = try PresentationFormat(descriptor: [0x0E, 0xFE, 0x2F, 0x27, 0x01, 0x00, 0x01])
        #expect(
            format == PresentationFormat(format: 0x0E, exponent: -2, unit: 0x272F, namespace: 1, description: 0x0100))
        #expect(format.formatName == "sint16" && format.valueFormat == .sint16le && format.unitSymbol == "°C")
        #expect(format.descriptorBytes == [0x0E, 0xFE, 0x2F, 0x27, 0x01, 0x00, 0x01])
        #expect(
            ReadingsDecoder.decode([0x6A, 0x08], as: .presentation(format, name: "temperature"))
                == [Reading(name: "temperature", value: .number(21.54), unit: "°C")])
    }

    @Test func descriptorLengthIsExact() {
        #expect { try PresentationFormat(descriptor: [0x04, 0, 0, 0x27, 1, 0]) } throws: { error in
            (error as? ReadingError) == .payloadTooShort(needs: 7, at: 0, has: 6)
        }
        #expect { try PresentationFormat(descriptor: Array(repeating: 0, count: 8)) } throws: { error in
            (error as? ReadingError)?.code == .payloadTooLong
        }
    }

    @Test func formatAndUnitTables() {
        let expectations: [(UInt8, String, ValueFormat?)] = [
            (0x01, "boolean", .uint8), (0x04, "uint8", .uint8), (0x06, "uint16", .uint16le),
            (0x07, "uint24", .uint24le),
            (0x08, "uint32", .uint32le), (0x0A, "uint64", .uint64le), (0x0C, "sint8", .sint8),
            (0x0E, "sint16", .sint16le),
            (0x0F, "sint24", .sint24le), (0x10, "sint32", .sint32le), (0x12, "sint64", .sint64le),
            (0x14, "float32", .float32le),
            (0x15, "float64", .float64le), (0x16, "SFLOAT", .sfloat), (0x17, "FLOAT", .float), (0x18, "duint16", nil),
            (0x19, "utf8s", .utf8), (0x1A, "utf16s", nil), (0x1B, "struct", nil), (0x09, "uint48", nil),
        ]
        for (code, name, format) in expectations {
            let presentation = PresentationFormat(format: code)
            #expect(presentation.formatName == name && presentation.valueFormat == format, "\(code)")
        }
        #expect(PresentationFormat(format: 0x00).formatName == nil)
        #expect(PresentationFormat(format: 0x1C).formatName == nil)
        let units: [(UInt16, String?)] = [
            (0x2700, nil), (0x2701, "m"), (0x2702, "kg"), (0x2703, "s"), (0x2704, "A"), (0x2705, "K"), (0x272F, "°C"),
            (0x27AD, "%"), (0x2724, "Pa"), (0x2731, "lx"), (0x2728, "V"), (0x2726, "W"), (0x2725, "J"), (0x2722, "Hz"),
            (0x27AF, "bpm"), (0x27A7, "mph"), (0x27C4, "ppm"), (0x27C5, "ppb"), (0x2715, "kg/m³"), (0x27AC, "°F"),
            (0x27B6, "W/m²"),
        ]
        for (unit, symbol) in units {
            #expect(PresentationFormat.unitSymbol(for: unit) == symbol, "\(unit)")
        }
    }

    @Test func presentationDecoding() {
        let exponentIgnoredOnFloats = PresentationFormat(format: 0x14, exponent: 3, unit: 0x2728)
        #expect(
            ReadingsDecoder.decode([0, 0, 0xC0, 0x3F], as: .presentation(exponentIgnoredOnFloats, name: "v"))
                == [Reading(name: "v", value: .number(1.5), unit: "V")])
        let millivolts = PresentationFormat(format: 0x06, exponent: -3, unit: 0x2728)
        #expect(
            ReadingsDecoder.decode([0xE8, 0x03], as: .presentation(millivolts, name: "v"))
                == [Reading(name: "v", value: .number(1), unit: "V")])
        let text = PresentationFormat(format: 0x19)
        #expect(
            ReadingsDecoder.decode(Array("hi".utf8), as: .presentation(text, name: "t")) == [
                Reading(name: "t", value: .text("hi"))
            ])
        let unsupported = ReadingsDecoder.decode([1], as: .presentation(PresentationFormat(format: 0x1B), name: "s"))
        #expect(unsupported.first?.error?.code == .unsupportedFormat)
        #expect(unsupported.first?.error?.message.contains("0x1B (struct)") == true)
        let sfloat = ReadingsDecoder.decode(
            [0xFF, 0x07], as: .presentation(PresentationFormat(format: 0x16), name: "x"))
        #expect(sfloat.first?.error?.code == .specialValue)
    }

    @Test func precedence() {
        let layout = Layout(fields: [Field(name: "x", at: 0, format: .uint8)])
        let presentation = PresentationFormat(format: 0x04)
        #expect(
            ReadingsDecoder.decoding(for: 0x2A6E, presentation: presentation, layout: layout, fallbackName: "f")
                == .layout(layout))
        #expect(
            ReadingsDecoder.decoding(for: 0x2A6E, presentation: presentation, layout: nil, fallbackName: "f")
                == .sig(0x2A6E))
        #expect(
            ReadingsDecoder.decoding(for: 0xFFF1, presentation: presentation, layout: nil, fallbackName: "f")
                == .presentation(presentation, name: "f"))
        #expect(
            ReadingsDecoder.decoding(for: nil, presentation: presentation, layout: nil, fallbackName: "f")
                == .presentation(presentation, name: "f"))
        #expect(
            ReadingsDecoder.decoding(
                for: nil, presentation: PresentationFormat(format: 0x1B), layout: nil, fallbackName: "f")
                == .hex(name: "f"))
        #expect(
            ReadingsDecoder.decoding(for: 0xFFF1, presentation: nil, layout: nil, fallbackName: "f") == .hex(name: "f"))
        #expect(
            ReadingsDecoder.decode([0xDE, 0xAD], as: .hex(name: "raw")) == [Reading(name: "raw", value: .text("dead"))])
    }
}
