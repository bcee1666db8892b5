import Basics
import Testing
@testable import MQTTBridge

/// The package's one JSON writer (Basics/JSONWriter.swift): what every record
/// line, discovery payload and JSON log line is written with.
@Suite struct JSONWriterTests {
    @Test func nestedObjectsAndArraysComeOutInTheOrderWritten() {
        var json = JSONObject()
        json.string("device", "greenhouse-north")
        json.object("empty") { _ in }
        json.object("window") { window in
            window.integer("id", 7)
            window.object("inner") { $0.bool("ok", true) }
            window.null("error")
        }
        json.array("values", [1, 2]) { object, value in object.integer("n", value) }
        json.array("nested") { array in
            array.string("a")
            array.array { inner in
                inner.string("b")
                inner.array { _ in }
            }
            array.object { $0.rawValue("raw", "[1,2]") }
        }
        json.array("none") { _ in }
        json.bool("last", false)
        let expected = #"{"device":"greenhouse-north","empty":{},"window":{"id":7,"inner":{"ok":true},"error":null},"#
            + #""values":[{"n":1},{"n":2}],"nested":["a",["b",[]],{"raw":[1,2]}],"none":[],"last":false}"#
        #expect(json.finished == expected)
        #expect(json.bytes == Array(expected.utf8))
        #expect(jsonObject(json.bytes)?["device"] as? String == "greenhouse-north")
        var array = JSONArray()
        array.string("x")
        #expect(array.finished == #"["x"]"#)
        #expect(JSONArray().finished == "[]" && JSONObject().finished == "{}")
    }

    @Test func integersAreWrittenExactlyAtEveryWidth() {
        var json = JSONObject()
        json.integer("zero", 0)
        json.integer("negative", -42)
        json.integer("min", Int64.min)
        json.integer("max", Int64.max)
        json.integer("umax", UInt64.max)
        json.integer("byte", UInt8(255))
        json.integer("int8", Int8.min)
        #expect(json.finished == #"{"zero":0,"negative":-42,"min":-9223372036854775808,"max":9223372036854775807,"#
            + #""umax":18446744073709551615,"byte":255,"int8":-128}"#)
    }

    @Test func everyControlCharacterIsEscapedAndOtherTextPassesThrough() {
        let controls = String(String.UnicodeScalarView((0..<0x20).map { Unicode.Scalar(UInt8($0)) }))
        var json = JSONObject()
        json.string("c", controls)
        json.string("text", "grüße 温度 🌱 \u{7F}")
        json.string("key \"q\"", "\\")
        let expected = #"{"c":"\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\u0008\t\n\u000b\u000c\r\u000e\u000f"#
            + #"\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f","#
            + "\"text\":\"grüße 温度 🌱 \u{7F}\",\"key \\\"q\\\"\":\"\\\\\"}"
        #expect(json.finished == expected)
        let parsed = jsonObject(json.bytes)
        #expect(parsed?["c"] as? String == controls && parsed?["text"] as? String == "grüße 温度 🌱 \u{7F}")
        #expect(parsed?["key \"q\""] as? String == "\\")
    }
}
