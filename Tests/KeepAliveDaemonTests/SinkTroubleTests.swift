import Testing

@testable import KeepAliveDaemon

/// A sink that cannot write is said once when it begins, once an hour while it lasts, and once when it ends:
/// the account on a manual sequence of instants.
@Suite("Sink trouble")
struct SinkTroubleTests {
    @Test func aFailureIsSaidOnceThenHourlyThenEndsWithTheRecordsItCost() {
        var trouble = SinkTrouble(every: .seconds(3_600))
        #expect(trouble.wrote(at: .seconds(1)) == nil)
        #expect(
            trouble.failed(sequence: 40, reason: "No space left on device", at: .seconds(10))
                == .began(reason: "No space left on device", sequence: 40))
        for sequence in UInt64(41)...45 {
            #expect(trouble.failed(sequence: sequence, reason: "No space left on device", at: .seconds(20)) == nil)
        }
        #expect(trouble.isFailing && trouble.lost == 6)
        #expect(
            trouble.failed(sequence: 46, reason: "Disk quota exceeded", at: .seconds(3_610))
                == .continues(reason: "Disk quota exceeded", lost: 7, over: .seconds(3_600)))
        #expect(trouble.failed(sequence: 47, reason: "Disk quota exceeded", at: .seconds(3_620)) == nil)
        #expect(trouble.wrote(at: .seconds(3_700)) == .ended(lost: 8, first: 40, last: 47, over: .seconds(3_690)))
        #expect(!trouble.isFailing && trouble.lost == 0)
        #expect(trouble.wrote(at: .seconds(3_701)) == nil)
        // A new failure is a new account.
        #expect(
            trouble.failed(sequence: 60, reason: "Input/output error", at: .seconds(4_000))
                == .began(reason: "Input/output error", sequence: 60))
        #expect(trouble.wrote(at: .seconds(4_001)) == .ended(lost: 1, first: 60, last: 60, over: .seconds(1)))
    }

    @Test func aSinkThatCannotWriteIsInTheStatusLine() {
        var status = DaemonStatus(polling: "polling 3 devices every 3s")
        status.failingSinks["the MQTT spool"] = "No space left on device"
        #expect(!status.isHealthy)
        #expect(
            status.text
                == "the MQTT spool cannot write, records are lost: No space left on device — polling 3 devices every 3s"
        )
    }
}
