import Testing
@testable import DBus
import LocalServices
import TestHarness

extension DBusTests {
    @Suite struct RoundTrips {
        static let everyType: [DBusValue] = [
            .byte(0xFF), .boolean(true), .boolean(false), .int16(.min), .uint16(.max), .int32(.min), .uint32(.max),
            .int64(.min), .uint64(.max), .double(-1.25), .string(""), .string("héllo ✓"), .objectPath("/"),
            .objectPath("/org/bluez/hci0"), .signature(""), .signature("a{oa{sa{sv}}}"), .bytes([]),
            .bytes([0, 1, 255]), .array(element: "s", []), .array(element: "s", [.string("a"), .string("b")]),
            .array(element: "a{sv}", [.dictionary(key: "s", value: "v", [])]),
            .array(element: "(ib)", [.structure([.int32(1), .boolean(false)])]),
            .dictionary(key: "s", value: "v", []),
            .dictionary(
                key: "s", value: "v",
                [
                    .init(key: .string("b"), value: .variant(.boolean(true))),
                    .init(key: .string("a"), value: .variant(.array(element: "s", []))),
                    .init(key: .string("nested"), value: .variant(.variant(.variant(.uint16(3))))),
                ]),
            .dictionary(key: "q", value: "v", [.init(key: .uint16(0x004C), value: .variant(.bytes([1, 2])))]),
            .dictionary(
                key: "o", value: "a{sa{sv}}",
                [
                    .init(
                        key: .objectPath("/x"),
                        value: .dictionary(
                            key: "s", value: "a{sv}",
                            [
                                .init(
                                    key: .string("org.bluez.Device1"),
                                    value: .dictionary(
                                        key: "s", value: "v",
                                        [
                                            .init(key: .string("RSSI"), value: .variant(.int16(-60)))
                                        ]))
                            ]))
                ]),
            .structure([.string("s"), .structure([.uint64(1), .variant(.double(2))])]),
            .variant(.structure([.byte(1)])),
        ]

        @Test func everyTypeSurvivesARoundTripThroughARealService() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                for value in Self.everyType {
                    let reply = try await EchoService.call(client, "Echo", [value])
                    #expect(reply == [value], "round trip of \(value.signature)")
                }
                // All at once, as one message with many arguments.
                let reply = try await EchoService.call(client, "Echo", Self.everyType)
                #expect(reply == Self.everyType)
            }
        }

        @Test func aOneMegabyteByteArrayRoundTripsInOnePiece() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let bytes = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
                let reply = try await EchoService.call(client, "Echo", [.bytes(bytes)])
                #expect(reply.count == 1)
                #expect(reply.first?.bytes == bytes)
            }
        }

        @Test func badValuesAreRefusedBeforeAnythingIsSent() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let closed = try UnixFileDescriptor(duplicating: 0)
                closed.close()
                let cases: [(DBusValue, DBusError.Code)] = [
                    (.array(element: "h", [.unixFileDescriptor(closed)]), .invalidArgument),
                    (.dictionary(key: "ay", value: "s", []), .invalidArgument),
                    (.array(element: "s", [.uint32(1)]), .typeMismatch),
                    (
                        .dictionary(key: "s", value: "v", [.init(key: .string("k"), value: .string("not a variant"))]),
                        .typeMismatch
                    ),
                    (.dictionary(key: "v", value: "s", []), .invalidArgument),
                    (.structure([]), .invalidArgument),
                    (.string("nul\0inside"), .invalidArgument),
                    (.array(element: "ss", []), .invalidArgument),
                ]
                for (value, code) in cases {
                    let error = await #expect(throws: DBusError.self) {
                        _ = try await EchoService.call(client, "Echo", [value])
                    }
                    #expect(error?.code == code, "\(value)")
                }
                // The connection is still fine afterwards.
                #expect(try await EchoService.call(client, "Echo", [.uint32(1)]) == [.uint32(1)])
            }
        }

        @Test func invalidNamesThrowInsteadOfAbortingTheProcess() async throws {
            try await PrivateBus.with { bus in
                let client = try await bus.connect()
                let attempts: [(String?, String?, String)] = [
                    ("not a bus name", "org.example.I", "M"),
                    ("org.example.Echo", "no-dots", "M"),
                    ("org.example.Echo", "org.example.I", "Bad.Member"),
                    ("org.example.Echo", "org.example.I", ""),
                    ("org.example.Echo", "org.exa\0mple.I", "M"),
                ]
                for (destination, interface, method) in attempts {
                    let error = await #expect(throws: DBusError.self) {
                        _ = try await client.call(
                            destination: destination, path: "/", interface: interface, method: method)
                    }
                    #expect(error?.code == .invalidArgument)
                }
                await #expect(throws: DBusError.self) {
                    try await client.emitSignal(path: "/", interface: "x", member: "Y")
                }
                await #expect(throws: DBusError.self) {
                    _ = try await client.signals(matching: MatchRule(member: "a.b"))
                }
            }
        }
    }
}
