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
            let message = try DBusMessage.methodCall(destination: "org.bluez", path: "/org/bluez/hci0", interface: "org.bluez.Device1", member: "Poll")
            let properties: DBusValue = .dictionary(key: "s", value: "v", [
                .init(key: .string("Name"), value: .variant(.string("Sensor-001"))),
                .init(key: .string("RSSI"), value: .variant(.int16(-60))),
                .init(key: .string("UUIDs"), value: .variant(.array(element: "s", [.string("0000180f-0000-1000-8000-00805f9b34fb")]))),
                .init(key: .string("ManufacturerData"), value: .variant(.dictionary(key: "q", value: "v", [
                    .init(key: .uint16(0x0499), value: .variant(.bytes([1, 2, 3, 4]))),
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
            let decoded = try DBusMessage(adopting: try #require(roundTrip, "\(failure.map { "\($0.name): \($0.message)" } ?? "")")).arguments()
            #expect(decoded == (try original.arguments()))

            var random = SeededRandomNumberGenerator(seed: 0x6b65_6570_616c_6976)
            var accepted = 0
            var decodedCount = 0
            var typedErrors = 0
            for _ in 0..<Self.iterations {
                var bytes = wire
                // 1-4 mutations: flip a byte, set it to an edge value, or cut the message short.
                for _ in 0..<(1 + Int(random.next() % 4)) {
                    let index = 16 + Int(random.next() % UInt64(bytes.count - 16))  // keep the fixed header's first 16
                    switch random.next() % 4 {
                    case 0: bytes[index] ^= UInt8(truncatingIfNeeded: random.next() | 1)
                    case 1: bytes[index] = [0x00, 0xFF, 0x7F, 0x80][Int(random.next() % 4)]
                    case 2: bytes[index] = [UInt8(ascii: "v"), UInt8(ascii: "a"), UInt8(ascii: "("), UInt8(ascii: "{"), UInt8(ascii: "h")][Int(random.next() % 5)]
                    default: bytes.removeLast(min(bytes.count - 17, Int(random.next() % 8)))
                    }
                }
                guard case (let raw?, _) = libdbus_message_demarshal(bytes) else { continue }
                accepted += 1
                do {
                    _ = try DBusMessage(adopting: raw).arguments()
                    decodedCount += 1
                } catch let error as DBusError {
                    typedErrors += 1
                    #expect(!error.message.isEmpty)
                }
            }
            print("decoding fuzz: \(Self.iterations) mutants, \(accepted) accepted by libdbus, \(decodedCount) decoded, \(typedErrors) typed errors, 0 traps")
            #expect(accepted > 0)
        }
    }
}
