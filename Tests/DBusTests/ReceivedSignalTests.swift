import LocalServices
import TestHarness
import Testing
@testable import DBus

extension DBusTests {
    /// The typed readers of `ReceivedSignal` (what the BlueZ object cache reads every signal with) give what the
    /// generic decoding gives, on signals sent through a real dbus-daemon, and name the signature they did not
    /// expect.
    @Suite struct ReceivedSignals {
        /// One reading by a handler: the typed result, or the typed error, beside the generic decoding.
        struct Reading: Sendable {
            let member: String
            let signature: DBusSignature
            let generic: [DBusValue]
            let change: Result<PropertiesChange, DBusError>?
            let added: Result<ObjectPath, DBusError>?
            let addedInterfaces: [String: [String: DBusValue]]
            let removed: Result<[String], DBusError>?
        }

        static func read(_ signal: ReceivedSignal) -> Reading {
            var added: Result<ObjectPath, DBusError>?
            var addedInterfaces: [String: [String: DBusValue]] = [:]
            if signal.member == "InterfacesAdded" {
                added = Result {
                    let (path, interfaces) = try signal.interfacesAdded()
                    for (name, properties) in interfaces { addedInterfaces[name] = properties }
                    return path
                }.mapError { $0 as! DBusError }
            }
            return Reading(
                member: signal.member, signature: signal.signature, generic: (try? signal.decoded().arguments) ?? [],
                change: signal.member == "PropertiesChanged"
                    ? Result { try signal.propertiesChanged() }.mapError { $0 as! DBusError } : nil,
                added: added, addedInterfaces: addedInterfaces,
                removed: signal.member == "InterfacesRemoved"
                    ? Result { try signal.interfacesRemoved().interfaces }.mapError { $0 as! DBusError } : nil)
        }

        static let path: ObjectPath = "/org/bluez/hci0/dev_C0_FF_EE_00_00_01"

        @Test func typedReadersGiveWhatTheGenericDecodingGivesAndNameAWrongSignature() async throws {
            try await PrivateBus.with { bus in
                let emitter = try await bus.connect()
                let client = try await bus.connect()
                let (readings, continuation) = AsyncStream<Reading>.makeStream()
                let token = try await client.addSignalHandler(
                    matching: MatchRule(sender: emitter.uniqueName), reading: { continuation.yield(Self.read($0)) },
                    onEnd: { _ in })
                defer { client.removeSignalHandler(token) }

                let properties = "org.freedesktop.DBus.Properties"
                let manager = "org.freedesktop.DBus.ObjectManager"
                let changed: DBusValue = .dictionary(
                    key: "s", value: "v",
                    [
                        .init(key: .string("Connected"), value: .variant(.boolean(true))),
                        .init(key: .string("Value"), value: .variant(.bytes([1, 2, 3]))),
                        .init(key: .string("Nested"), value: .variant(.variant(.uint16(7)))),
                    ])
                let sent: [(member: String, interface: String, arguments: [DBusValue])] = [
                    (
                        "PropertiesChanged", properties,
                        [
                            .string("org.bluez.Device1"), changed,
                            .array(element: "s", [.string("RSSI"), .string("TxPower")]),
                        ]
                    ),
                    // Without the invalidated list, or with something else there: nothing invalidated.
                    ("PropertiesChanged", properties, [.string("org.bluez.Device1"), changed]),
                    ("PropertiesChanged", properties, [.string("org.bluez.Device1"), changed, .uint32(1)]),
                    (
                        "InterfacesAdded", manager,
                        [
                            .objectPath(Self.path),
                            .dictionary(
                                key: "s", value: "a{sv}",
                                [
                                    .init(
                                        key: .string("org.bluez.Device1"),
                                        value: .dictionary(
                                            key: "s", value: "v",
                                            [
                                                .init(
                                                    key: .string("Address"),
                                                    value: .variant(.string("C0:FF:EE:00:00:01")))
                                            ])),
                                    .init(
                                        key: .string("org.freedesktop.DBus.Properties"),
                                        value: .dictionary(key: "s", value: "v", [])),
                                ]),
                        ]
                    ),
                    (
                        "InterfacesRemoved", manager,
                        [.objectPath(Self.path), .array(element: "s", [.string("org.bluez.Device1")])]
                    ),
                    // Wrong signatures: each reader names what it expected and what came.
                    ("PropertiesChanged", properties, [.string("org.bluez.Device1"), .array(element: "s", [])]),
                    (
                        "InterfacesAdded", manager,
                        [.objectPath(Self.path), .array(element: "s", [.string("org.bluez.Device1")])]
                    ),
                    ("InterfacesRemoved", manager, [.string("/org/bluez"), .array(element: "s", [])]),
                ]
                for signal in sent {
                    try await emitter.emitSignal(
                        path: Self.path, interface: signal.interface, member: signal.member, arguments: signal.arguments
                    )
                }
                var received: [Reading] = []
                for await reading in readings {
                    received.append(reading)
                    if received.count == sent.count { break }
                }

                #expect(received.map(\.generic) == sent.map(\.arguments), "decoded() reads what was sent")
                let full = try #require(try received[0].change?.get())
                #expect(full.interface == "org.bluez.Device1")
                #expect(full.changed.map(\.name) == ["Connected", "Value", "Nested"], "in the order they came")
                #expect(full["Connected"] == .boolean(true) && full["Value"] == .bytes([1, 2, 3]))
                #expect(
                    full["Nested"] == .variant(.uint16(7)),
                    "one v taken off, as the generic decoding's dictionary keeps it")
                #expect(full["RSSI"] == nil && full.invalidated == ["RSSI", "TxPower"])
                for index in [1, 2] {
                    let partial = try #require(try received[index].change?.get())
                    #expect(partial.changed == full.changed && partial.invalidated.isEmpty)
                }
                #expect(try received[3].added?.get() == Self.path)
                #expect(
                    received[3].addedInterfaces == [
                        "org.bluez.Device1": ["Address": .string("C0:FF:EE:00:00:01")],
                        "org.freedesktop.DBus.Properties": [:],
                    ])
                #expect(try received[4].removed?.get() == ["org.bluez.Device1"])

                let wrong = [received[5].change?.error, received[6].added?.error, received[7].removed?.error]
                #expect(wrong.map { $0?.code } == [.typeMismatch, .typeMismatch, .typeMismatch])
                #expect(
                    wrong.map { $0?.message } == [
                        "expected signature 'sa{sv}as', found 'sas'", "expected signature 'oa{sa{sv}}', found 'oas'",
                        "expected signature 'oas', found 'sas'",
                    ])
                #expect(received[5...].map(\.signature.rawValue) == ["sas", "oas", "sas"])
            }
        }
    }
}

extension Result {
    fileprivate var error: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }
}
