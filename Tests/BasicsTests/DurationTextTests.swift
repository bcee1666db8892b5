import Basics
import Testing

/// The one duration grammar: what the configuration, the command line and MQTT commands accept.
@Suite("Duration text")
struct DurationTextTests {
    @Test(arguments: [
        ("500ms", Duration.milliseconds(500)), ("30s", .seconds(30)), ("2m", .seconds(120)), ("1h", .seconds(3600)),
        ("1.5s", .milliseconds(1500)), ("0.1s", .milliseconds(100)), ("0s", .zero), ("1.25m", .seconds(75)),
        ("0.5ms", .microseconds(500)), ("1.2345s", .microseconds(1_234_500)), (" 45s\n", .seconds(45)),
        ("0.25m", .seconds(15)), ("0.000000001s", .nanoseconds(1)),
    ])
    func aNumberAndAUnitIsADuration(text: String, expected: Duration) {
        #expect(DurationText.parse(text) == expected)
    }

    @Test(arguments: [
        "30", "-1s", "+1s", "30 s", "30S", "1.s", ".5s", "1e3s", "s", "", "1,5s", "30sec", "1.0000000001s",
        "99999999999999999999h", "9223372036854775807h", "1..5s", "30x", "0x10s",
    ])
    func anythingElseIsNot(text: String) {
        #expect(DurationText.parse(text) == nil)
    }

    @Test func theBoundsAreZeroUnlessAllowedAndADay() {
        #expect(DurationText.check("0s").failure?.kind == .outOfRange)
        #expect(DurationText.check("0s", allowZero: true).success == .zero)
        #expect(DurationText.check("24h").success == .seconds(86_400))
        #expect(DurationText.check("24.001h").failure?.message == "24.001h is longer than 24h, the most allowed")
        #expect(DurationText.check("30").failure?.kind == .notADuration)
        // Past what Int64 nanoseconds hold is still a number and a unit: too long, not "not a duration".
        for text in ["1000000h", "99999999999999999999h", "9223372036854775807h", "1000000000000000000s"] {
            #expect(DurationText.check(text).failure?.message == "\(text) is longer than 24h, the most allowed")
        }
        #expect(DurationText.check("1.0000000001s").failure?.message == "1.0000000001s is finer than a nanosecond")
        #expect(DurationText.check("1e18s").failure?.kind == .notADuration)
    }

    @Test(arguments: [
        (
            "30",
            "a bare number is ambiguous (seconds? milliseconds?): write `30s` or another unit, e.g. 500ms, 30s, 2m, 1h"
        ),
        ("-5s", "`-5s` is negative: a duration is a number and a unit (ms, s, m or h), e.g. 500ms, 30s, 2m, 1h"),
        ("30 sec", "`30 sec` is not a duration: write `30s`"),
        ("3 0s", "`3 0s` has spaces: write `30s`"),
        ("soon", "`soon` is not a duration: expected a number and a unit (ms, s, m or h), e.g. 500ms, 30s, 2m, 1h"),
    ])
    func aMistakeGetsTheClosestCorrectSpelling(text: String, advice: String) {
        #expect(DurationText.advice(text) == advice)
    }
}

extension Result {
    var success: Success? {
        if case .success(let value) = self { return value }
        return nil
    }

    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

/// Text from a file or the network, as logs and terminals get it.
@Suite("Message text")
struct MessageTextTests {
    @Test func controlCharactersAreSpelledOutAndTheRestKept() {
        #expect(MessageText.escaped("sensor-1 °C") == "sensor-1 °C")
        #expect(MessageText.escaped("a\u{1B}[2Jb") == "a\\u{1B}[2Jb")
        #expect(MessageText.escaped("line\nforged") == "line\\nforged")
        #expect(MessageText.escaped("del\u{7F} csi\u{9B}") == "del\\u{7F} csi\\u{009B}")
    }

    @Test func aLongTopicIsShortenedAroundItsLength() {
        let short = "keepalive/gw/sensor-1/poll"
        #expect(MessageText.topic(short) == short)
        let long = "keepalive/gw/" + String(repeating: "x", count: 65_000) + "/poll"
        let shown = MessageText.topic(long)
        #expect(shown.hasPrefix("keepalive/gw/xxx") && shown.hasSuffix("xxx/poll"))
        #expect(shown.contains("…(65018 bytes)…") && shown.count < 120)
    }
}
