import KeepAliveTesting
import Testing
@testable import DBus

#if canImport(Glibc)
    import Glibc
#endif

extension DBusTests {
    /// Decoding whatever libdbus accepts never traps: a message using every type is marshalled, its bytes are
    /// mutated with a seeded generator, and each mutant libdbus demarshals is decoded. Decoding either yields
    /// values or a typed `DBusError` that says which signature it met. 2,000 mutants in the suite;
    /// `KEEPALIVE_FUZZ_ITERATIONS` (CI: 100,000) for more.
    @Suite struct DecodingFuzz {
        static var iterations: Int {
            getenv("KEEPALIVE_FUZZ_ITERATIONS").flatMap { Int(String(cString: $0)) } ?? 2_000
        }

        static func richMessage() throws -> DBusMessage {
            let message = try DBusMessage.methodCall(
                destination: "org.bluez", path: "/org/bluez/hci0", interface: "org.bluez.Device1", member: "Poll")
            let properties: DBusValue = .dictionary(
                key: "s", value: "v",
                [
                    .init(key: .string("Name"), value: .variant(.string("Sensor-001"))),
                    .init(key: .string("RSSI"), value: .variant(.int16(-60))),
                    .init(
                        key: .string("UUIDs"),
                        value: .variant(.array(element: "s", [.string("0000180f-0000-1000-8000-00805f9b34fb")]))),
                    .init(
                        key: .string("ManufacturerData"),
                        value: .variant(
                            .dictionary(
                                key: "q", value: "v",
                                [
                                    .init(key: .uint16(0x0499), value: .variant(.bytes([1, 2, 3, 4])))
                                ]))),
                ])
            try message.appendArguments([
                .byte(7), .boolean(true), .int16(-2), .uint16(2), .int32(-3), .uint32(3), .int64(-4), .uint64(4),
                .double(21.5), .string("grüße"), .objectPath("/org/bluez/hci0/dev_C0_FF_EE_00_00_01"),
                .signature("a{sv}"), .bytes(Array(0..<32)), properties,
                .structure([.string("x"), .array(element: "(iy)", [.structure([.int32(1), .byte(2)])])]),
                .variant(.variant(.array(element: "ay", [.bytes([9, 9]), .bytes([])]))),
            ])
            return message
        }

        @Test func mutatedMessagesDecodeToValuesOrTypedErrorsNeverATrap() throws {
            let original = try Self.richMessage()
            let wire = try #require(libdbus_message_marshal(original.pointer))
            // The unmutated message round-trips exactly.
            let (roundTrip, failure) = libdbus_message_demarshal(wire)
            let decoded = try DBusMessage(
                adopting: try #require(roundTrip, "\(failure.map { "\($0.name): \($0.message)" } ?? "")")
            ).arguments()
            #expect(decoded == (try original.arguments()))

            var decodedCount = 0
            var typedErrors = 0
            let accepted = Self.forEachMutant(of: wire, seed: 0x6b65_6570_616c_6976) { raw in
                do {
                    _ = try DBusMessage(adopting: raw).arguments()
                    decodedCount += 1
                } catch let error as DBusError {
                    typedErrors += 1
                    #expect(!error.message.isEmpty)
                } catch {
                    Issue.record("an untyped error: \(error)")
                }
            }
            print(
                """
                    decoding fuzz: \(Self.iterations) mutants, \(accepted) accepted by libdbus, \(decodedCount) \
                    decoded, \(typedErrors) typed errors, 0 traps
                    """
            )
            #expect(accepted > 0)
        }

        /// The typed readers the BlueZ object cache reads every signal with, on mutants of the three signals it
        /// follows: each read gives values or a typed `DBusError`.
        @Test func mutatedSignalsReadByTheTypedReadersGiveValuesOrTypedErrors() throws {
            let path: ObjectPath = "/org/bluez/hci0/dev_C0_FF_EE_00_00_01"
            let properties: DBusValue = .dictionary(
                key: "s", value: "v",
                [
                    .init(key: .string("Connected"), value: .variant(.boolean(true))),
                    .init(key: .string("Value"), value: .variant(.bytes([1, 2, 3, 4]))),
                    .init(
                        key: .string("UUIDs"),
                        value: .variant(.array(element: "s", [.string("0000180f-0000-1000-8000-00805f9b34fb")]))),
                ])
            let signals: [(member: String, interface: String, arguments: [DBusValue])] = [
                (
                    "PropertiesChanged", "org.freedesktop.DBus.Properties",
                    [.string("org.bluez.Device1"), properties, .array(element: "s", [.string("RSSI")])]
                ),
                (
                    "InterfacesAdded", "org.freedesktop.DBus.ObjectManager",
                    [
                        .objectPath(path),
                        .dictionary(
                            key: "s", value: "a{sv}", [.init(key: .string("org.bluez.Device1"), value: properties)]),
                    ]
                ),
                (
                    "InterfacesRemoved", "org.freedesktop.DBus.ObjectManager",
                    [.objectPath(path), .array(element: "s", [.string("org.bluez.Device1")])]
                ),
            ]
            var read = 0
            var typedErrors = 0
            var accepted = 0
            for (index, signal) in signals.enumerated() {
                let message = try DBusMessage.signal(
                    path: path, interface: signal.interface, member: signal.member, destination: nil)
                try message.appendArguments(signal.arguments)
                let wire = try #require(libdbus_message_marshal(message.pointer))
                accepted += Self.forEachMutant(
                    of: wire, seed: 0x7369_676e_616c + UInt64(index), count: Self.iterations / 4
                ) { raw in
                    let received = ReceivedSignal(
                        sender: ":1.1", path: path, interface: signal.interface, member: signal.member,
                        message: DBusMessage(adopting: raw))
                    do {
                        switch index {
                        case 0: _ = try received.propertiesChanged()
                        case 1: _ = try received.interfacesAdded()
                        default: _ = try received.interfacesRemoved()
                        }
                        read += 1
                    } catch let error as DBusError {
                        typedErrors += 1
                        #expect(!error.message.isEmpty)
                    } catch {
                        Issue.record("an untyped error: \(error)")
                    }
                }
            }
            print(
                """
                    decoding fuzz: typed signal readers, \(Self.iterations / 4 * 3) mutants, \(accepted) accepted by \
                    libdbus, \(read) read, \(typedErrors) typed errors, 0 traps
                    """
            )
            // libdbus refuses a body that does not fit its signature: wrong signatures are ReceivedSignals' case.
            #expect(read > 0)
        }

        /// Mutates `wire` `count` times (1-4 edits each: flip a byte, set it to an edge value or a type code, or cut
        /// the message short), and calls `body` with each mutant libdbus demarshals. Returns how many it did.
        static func forEachMutant(of wire: [UInt8], seed: UInt64, count: Int = iterations, _ body: (RawMessage) -> Void)
            -> Int
        {
            var random = SeededRandomNumberGenerator(seed: seed)
            var accepted = 0
            for _ in 0..<count {
                var bytes = wire
                for _ in 0..<(1 + Int(random.next() % 4)) {
                    let index = 16 + Int(random.next() % UInt64(bytes.count - 16))  // keep the fixed header's first 16
                    switch random.next() % 4 {
                    case 0: bytes[index] ^= UInt8(truncatingIfNeeded: random.next() | 1)
                    case 1: bytes[index] = [0x00, 0xFF, 0x7F, 0x80][Int(random.next() % 4)]
                    case 2:
                        bytes[index] =
                            [
                                UInt8(ascii: "v"), UInt8(ascii: "a"), UInt8(ascii: "("), UInt8(ascii: "{"),
                                UInt8(ascii: "h"),
                            ][Int(random.next() % 5)]
                    default: bytes.removeLast(min(bytes.count - 17, Int(random.next() % 8)))
                    }
                }
                guard case (let raw?, _) = libdbus_message_demarshal(bytes) else { continue }
                accepted += 1
                body(raw)
            }
            return accepted
        }
    }
}
