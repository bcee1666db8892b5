@testable import KeepAliveDaemon
import Testing

/// The fleet view reads the last record of every shared device off its state topic: what anyone could publish
/// there, so the reader must take any JSON and refuse anything else without a trap.
@Suite struct RecordStringsTests {
    @Test func aRecordsStringsAreReadWhateverItsNumbers() {
        let record = #"{"seq":7,"address":"C0:FF:EE:00:00:01","holder":"gw-a","ts":"2026-11-26T18:00:00.000Z","#
            + #""readings":{"temperature":{"value":-21.5e0,"unit":"\u00b0C"}},"big":123456789012345678901234,"#
            + #""ratio":0.25,"error":null,"ok":true,"device":"a \"quoted\" name"}"#
        let strings = RecordStrings.of(Array(record.utf8))
        #expect(strings?["address"] == "C0:FF:EE:00:00:01")
        #expect(strings?["holder"] == "gw-a")
        #expect(strings?["device"] == "a \"quoted\" name")
        #expect(strings?["seq"] == nil, "numbers are not strings")
        // Not an object, or not JSON: nil, never a trap.
        for bad in ["[1,2]", "{\"a\":1.}", "{\"a\":-}", "{\"a\":01}", "{\"a\":1e}", "{\"a\":\"x\"} x", ""] {
            #expect(RecordStrings.of(Array(bad.utf8)) == nil, "\(bad)")
        }
    }
}
