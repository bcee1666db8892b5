import KeepAliveDaemon
import Testing

/// The log's flood guard on a manual clock: a warning repeated every tick is logged once, then summarised.
@Suite("Repeated warnings")
struct RepeatSuppressorTests {
    let aborted = RepeatSuppressor.Key(
        label: "keepalive", message: "poll failed", device: "sensor-1", errorClass: "connectionAborted")

    func stamp(_ seconds: Int64) -> String { "t+\(seconds)s" }

    @Test func theFirstIsLoggedTheRepeatsAreCountedAndTheNextAfterTheWindowCarriesTheSummary() {
        var repeats = RepeatSuppressor(window: .seconds(3_600))
        #expect(repeats.admit(aborted, at: .zero, stamp: stamp(0)) == .log)
        // Every 30 s for an hour: 119 more, none logged.
        for tick in Int64(1)..<120 {
            #expect(repeats.admit(aborted, at: .seconds(tick * 30), stamp: stamp(tick * 30)) == .suppress)
        }
        let decision = repeats.admit(aborted, at: .seconds(3_600), stamp: stamp(3_600))
        #expect(
            decision
                == .summarize(
                    RepeatSuppressor.Summary(
                        key: aborted, repeated: 119, span: .seconds(3_570), first: "t+0s", last: "t+3570s")))
        // A new window starts with the one just logged.
        #expect(repeats.admit(aborted, at: .seconds(3_630), stamp: stamp(3_630)) == .suppress)
    }

    @Test func anotherErrorClassOrDeviceIsAnotherWarning() {
        var repeats = RepeatSuppressor()
        #expect(repeats.admit(aborted, at: .zero, stamp: "") == .log)
        var timeout = aborted
        timeout.errorClass = "timeout"
        #expect(repeats.admit(timeout, at: .seconds(1), stamp: "") == .log)
        var other = aborted
        other.device = "sensor-2"
        #expect(repeats.admit(other, at: .seconds(2), stamp: "") == .log)
        #expect(repeats.admit(aborted, at: .seconds(3), stamp: "") == .suppress)
        #expect(repeats.tracked == 3)
    }

    @Test func aDeviceThatWorksAgainGetsItsSummaryAtOnceAndStartsAfresh() {
        var repeats = RepeatSuppressor()
        #expect(repeats.admit(aborted, at: .zero, stamp: "first") == .log)
        #expect(repeats.admit(aborted, at: .seconds(30), stamp: "second") == .suppress)
        #expect(repeats.admit(aborted, at: .seconds(60), stamp: "third") == .suppress)
        #expect(repeats.flush(device: "sensor-2").isEmpty)
        let summaries = repeats.flush(device: "sensor-1")
        #expect(
            summaries == [
                RepeatSuppressor.Summary(key: aborted, repeated: 2, span: .seconds(60), first: "first", last: "third")
            ])
        #expect(repeats.tracked == 0)
        #expect(repeats.admit(aborted, at: .seconds(90), stamp: "") == .log)
    }

    /// A connection's warning is about a broker, not a device (issue #40): it is folded the same way, and only a
    /// connection to that broker ends its counting, never a device of the same name working again.
    @Test func aBrokersWarningIsFoldedAndEndsWhenTheBrokerConnects() {
        var repeats = RepeatSuppressor()
        let refused = RepeatSuppressor.Key(
            label: "keepalive", message: "cannot connect to the MQTT broker; retrying", device: "127.0.0.1:1883",
            errorClass: "MQTTError.notAuthorized", subject: .broker)
        #expect(repeats.admit(refused, at: .zero, stamp: "first") == .log)
        #expect(repeats.admit(refused, at: .seconds(1), stamp: "second") == .suppress)
        #expect(repeats.admit(refused, at: .seconds(3), stamp: "third") == .suppress)
        #expect(repeats.flush(device: "127.0.0.1:1883").isEmpty, "a device's name is not a broker")
        #expect(repeats.flush(broker: "127.0.0.1:1884").isEmpty)
        #expect(
            repeats.flush(broker: "127.0.0.1:1883") == [
                RepeatSuppressor.Summary(key: refused, repeated: 2, span: .seconds(3), first: "first", last: "third")
            ])
        #expect(repeats.tracked == 0)
    }

    /// The class of an error is what its text says before the details: the code of a transport error, the type and
    /// code of the `Type.code(…)` form (whose details name a broker, a user, a delay).
    @Test(arguments: [
        ("connectionAborted: Connect C0:FF:EE:00:00:01: le-connection-abort-by-local", "connectionAborted"),
        (
            "MQTTError.notAuthorized(broker 127.0.0.1:1883 refused user \"gw\"; CONNACK: Not authorized)",
            "MQTTError.notAuthorized"
        ),
        (
            "MQTTError.timeout(broker 127.0.0.1:1883 accepted the connection but did not answer CONNECT within 5s)",
            "MQTTError.timeout"
        ),
        ("plain", "plain"),
    ])
    func anErrorsClassIsItsTextBeforeTheDetails(text: String, errorClass: String) {
        #expect(RepeatedWarnings.errorClass(text) == errorClass)
    }

    @Test func aWarningSeenOnlyOnceNeedsNoSummary() {
        var repeats = RepeatSuppressor(window: .seconds(60))
        #expect(repeats.admit(aborted, at: .zero, stamp: "") == .log)
        #expect(repeats.admit(aborted, at: .seconds(600), stamp: "") == .log)
        #expect(repeats.flushAll().isEmpty)
    }

    @Test func aRejectedCommandIsNotForgivenWhenTheDevicePollsWell() {
        var repeats = RepeatSuppressor()
        let rejected = RepeatSuppressor.Key(
            label: "keepalive", message: "command rejected", device: "sensor-1", errorClass: "notADuration",
            subject: .commands)
        #expect(repeats.admit(rejected, at: .zero, stamp: "first") == .log)
        #expect(repeats.admit(rejected, at: .milliseconds(1), stamp: "second") == .suppress)
        // The sensor answers: its poll warnings end, the sender's bad commands do not.
        #expect(repeats.flush(device: "sensor-1").isEmpty)
        #expect(repeats.admit(rejected, at: .milliseconds(2), stamp: "third") == .suppress)
        #expect(repeats.flushAll().map(\.repeated) == [2])
    }
}
