import Fleet
import Testing

@Suite struct WireFormatTests {
    @Test func aLeaseMessageEncodesCompactlyAndRoundTrips() throws {
        let message = LeaseMessage(
            kind: .release, id: FleetMessageID(gateway: "gw1", incarnation: 7, sequence: 42),
            previous: FleetMessageID(gateway: "gw2", incarnation: 3, sequence: 17), leaseNanoseconds: 30_000_000_000,
            successor: "gw3")
        let text = String(decoding: message.encoded(), as: UTF8.self)
        #expect(
            text == #"{"v":1,"k":"release","g":"gw1","i":7,"n":42,"p":{"g":"gw2","i":3,"n":17},"l":30000,"to":"gw3"}"#)
        #expect(try LeaseMessage(decoding: message.encoded()) == message)
    }

    @Test func reportsAndDescriptionsRoundTrip() throws {
        let report = ReachReport(gateway: "gw1", adapter: "hci0", rssi: nil, successPermille: 875, freeSlots: 3)
        #expect(try ReachReport(decoding: report.encoded()) == report)
        let description = GatewayDescription(
            gateway: "gw1", version: "1.4.0", adapters: [.init(name: "hci0", slots: 5)])
        #expect(try GatewayDescription(decoding: description.encoded()) == description)
    }

    @Test(arguments: [
        (#"{"v":1,"k":"claim","g":"a","i":1,"n":1,"p":null}"#, FleetDecodingError.missingField("l")),
        (#"{"v":2}"#, .unsupportedVersion(2)),
        (#"{"v":1,"k":"steal","g":"a","i":1,"n":1,"p":null,"l":1}"#, .invalidField("k")),
        (#"{"v":1,"k":"claim","g":"a/b","i":1,"n":1,"p":null,"l":1}"#, .invalidField("g")),
        (
            #"{"v":1,"k":"claim","g":"a","i":1,"n":1,"p":null,"l":1.5}"#,
            .syntax(.unexpectedByte(UInt8(ascii: "."), at: 53))
        ),
        (#"[1]"#, .notAnObject),
        (#"{"v":1,"#, .syntax(.unexpectedEnd)),
    ])
    func malformedLeaseMessagesAreTypedErrors(payload: String, expected: FleetDecodingError) {
        #expect(throws: expected) { try LeaseMessage(decoding: Array(payload.utf8)) }
    }

    @Test func hostilePayloadsNeverCrash() {
        var random: UInt64 = 0x1234_5678
        let alphabet = Array(#"{}[]":,0123456789-ntrufalse\ "vkgipl"#.utf8)
        for _ in 0..<2_000 {
            var bytes: [UInt8] = []
            for _ in 0..<Int(random % 40) {
                random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                bytes.append(alphabet[Int(random >> 33) % alphabet.count])
            }
            _ = try? LeaseMessage(decoding: bytes)
            _ = try? ReachReport(decoding: bytes)
        }
        let deep = Array((String(repeating: "[", count: 100) + String(repeating: "]", count: 100)).utf8)
        #expect(throws: FleetDecodingError.self) { try LeaseMessage(decoding: deep) }
    }
}
