import Basics
import Testing

@Suite("Hex")
struct HexTests {
    @Test func bytesRoundTripInLowerCaseAndEitherCaseIsRead() {
        let bytes: [UInt8] = [0x00, 0x0a, 0x1b, 0xff, 0x80]
        #expect(Hex.string(bytes) == "000a1bff80")
        #expect(Hex.bytes("000A1bFF80") == bytes)
        #expect(Hex.bytes("abc") == nil, "an odd count")
        #expect(Hex.bytes("0g") == nil)
        #expect(Hex.bytes("+f") == nil, "no sign sneaks in")
        #expect(Hex.lowercaseValue(of: UInt8(ascii: "A")) == nil)
        #expect(Hex.lowercaseValue(of: UInt8(ascii: "a")) == 10)
    }
}

/// The one JSON writer and the one reader agree: what one writes, the other reads back, byte for byte.
@Suite("JSON")
struct JSONTests {
    @Test func whatTheWriterWritesTheReaderReadsBackExactly() throws {
        var object = JSONObject()
        object.string("name", "a \"quoted\"\nname \u{1}")
        object.integer("negative", -42)
        object.integer("big", UInt64.max >> 1)
        object.bool("ok", true)
        object.null("none")
        object.array("list") { list in
            list.string("x")
            list.object { $0.integer("n", 1) }
        }
        let bytes = object.bytes
        let read = try JSONParser.parse(bytes, anyNumber: true, maximumBytes: 4096)
        #expect(read["name"]?.stringValue == "a \"quoted\"\nname \u{1}")
        #expect(read["negative"]?.integerValue == -42)
        #expect(read["ok"] == .bool(true) && read["none"] == .null)
        #expect(read.encoded() == bytes, "the reader's tree written back is the same bytes")
    }

    @Test func hostileInputIsATypedErrorNeverATrap() {
        for bad in ["", "{", "{\"a\":}", "[1,]", "\"\\u12\"", "{\"a\":1} x", String(repeating: "[", count: 50)] {
            #expect(throws: JSONSyntaxError.self, "\(bad)") { try JSONParser.parse(Array(bad.utf8)) }
        }
    }
}
