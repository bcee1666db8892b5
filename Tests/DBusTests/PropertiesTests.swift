import Testing
@testable import DBus
import LocalServices
import TestHarness

extension DBusTests {
    @Suite struct Properties {
        @Test func getSetAndGetAllWorkAndSetEmitsPropertiesChanged() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let (name, path, interface) = (EchoService.name, EchoService.path, EchoService.interface)
                #expect(
                    try await client.getProperty("Counter", interface: interface, destination: name, path: path)
                        == .uint32(7))
                let changes = try await client.signals(
                    matching: MatchRule(
                        path: path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                        arg0: interface))
                try await client.setProperty(
                    "Counter", interface: interface, value: .uint32(42), destination: name,
                    path: path)
                let received = try await collect(changes) { _ in true }
                let (changedInterface, changed, invalidated) = try received[0].arguments.decode(
                    String.self, [String: DBusValue].self, [String].self)
                #expect(changedInterface == interface)
                #expect(changed == ["Counter": .uint32(42)])
                #expect(invalidated.isEmpty)
                #expect(
                    try await client.getAllProperties(interface: interface, destination: name, path: path)
                        == ["Counter": .uint32(42), "Label": .string("echo")])
            }
        }

        @Test func propertyErrorsUseTheStandardNames() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let (name, path, interface) = (EchoService.name, EchoService.path, EchoService.interface)
                let readOnly = await #expect(throws: DBusError.self) {
                    try await client.setProperty(
                        "Label", interface: interface, value: .string("x"), destination: name,
                        path: path)
                }
                #expect(readOnly?.name == DBusError.StandardName.propertyReadOnly)
                let wrongType = await #expect(throws: DBusError.self) {
                    try await client.setProperty(
                        "Counter", interface: interface, value: .string("x"),
                        destination: name, path: path)
                }
                #expect(wrongType?.name == DBusError.StandardName.invalidArgs)
                let unknown = await #expect(throws: DBusError.self) {
                    _ = try await client.getProperty("Nope", interface: interface, destination: name, path: path)
                }
                #expect(unknown?.name == DBusError.StandardName.unknownProperty)
                let noInterface = await #expect(throws: DBusError.self) {
                    _ = try await client.getAllProperties(interface: "org.example.None", destination: name, path: path)
                }
                #expect(noInterface?.name == DBusError.StandardName.unknownInterface)
            }
        }

        @Test func propertiesChangedCarriesChangedAndInvalidatedProperties() async throws {
            try await PrivateBus.with { bus in
                let service = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let changes = try await client.signals(matching: MatchRule(member: "PropertiesChanged"))
                try await service.connection.propertiesChanged(
                    path: EchoService.path, interface: "org.bluez.GattCharacteristic1",
                    changed: ["Value": .bytes([1, 2, 3])], invalidated: ["Flags"])
                let signal = try #require(try await collect(changes) { _ in true }.first)
                #expect(
                    signal.arguments == [
                        .string("org.bluez.GattCharacteristic1"),
                        .dictionary(
                            key: "s", value: "v", [.init(key: .string("Value"), value: .variant(.bytes([1, 2, 3])))]),
                        .array(element: "s", [.string("Flags")]),
                    ])
            }
        }

        @Test func objectManagerListsObjectsAndAnnouncesAddedAndRemovedInterfaces() async throws {
            try await PrivateBus.with { bus in
                let service = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let objects = try await client.getManagedObjects(
                    destination: EchoService.name, path: EchoService.managerRoot)
                #expect(
                    objects == [
                        EchoService.path: [EchoService.interface: ["Counter": .uint32(7), "Label": .string("echo")]]
                    ])
                let announcements = try await client.signals(
                    matching: MatchRule(
                        sender: EchoService.name, path: EchoService.managerRoot,
                        interface: "org.freedesktop.DBus.ObjectManager"))
                let child: ObjectPath = "/org/example/Extra/Child"
                let extra = DBusObject(interfaces: [
                    DBusInterface(
                        "org.example.Extra", properties: [DBusProperty("Flag", signature: "b", get: { .boolean(true) })]
                    )
                ])
                try await service.connection.export(extra, at: child)
                try await service.connection.unexport(at: child)
                let received = try await collect(announcements) { $0.member == "InterfacesRemoved" }
                #expect(received.map(\.member) == ["InterfacesAdded", "InterfacesRemoved"])
                let (addedPath, added) = try received[0].arguments.decode(
                    ObjectPath.self, [String: [String: DBusValue]].self)
                #expect(addedPath == child)
                #expect(added == ["org.example.Extra": ["Flag": .boolean(true)]])
                #expect(
                    try received[1].arguments.decode(ObjectPath.self, [String].self) == (child, ["org.example.Extra"]))
                #expect(
                    try await client.getManagedObjects(destination: EchoService.name, path: EchoService.managerRoot)
                        .count == 1)
            }
        }

        @Test func anObjectManagersReplyWalkedObjectByObjectIsTheSameTree() async throws {
            try await PrivateBus.with { bus in
                let service = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let extra = DBusObject(interfaces: [
                    DBusInterface(
                        "org.example.Extra",
                        properties: [
                            DBusProperty("Flag", signature: "b", get: { .boolean(true) }),
                            DBusProperty("Nested", signature: "v", get: { .variant(.string("inner")) }),
                            DBusProperty("Bytes", signature: "ay", get: { .bytes([1, 2]) }),
                        ]),
                    DBusInterface("org.example.Empty"),
                ])
                try await service.connection.export(extra, at: "/org/example/Extra/Child")
                var walked: [ObjectPath: [String: [String: DBusValue]]] = [:]
                try await client.getManagedObjects(destination: EchoService.name, path: EchoService.managerRoot) {
                    path, interface, properties in
                    #expect(walked[path]?[interface] == nil, "each interface of each object once")
                    walked[path, default: [:]][interface] = properties
                }
                let decoded = try await client.getManagedObjects(
                    destination: EchoService.name, path: EchoService.managerRoot)
                #expect(walked == decoded)
                #expect(
                    walked["/org/example/Extra/Child"]?["org.example.Extra"]?["Nested"] == .variant(.string("inner")),
                    "only the property's own v is taken off")
                #expect(walked["/org/example/Extra/Child"]?["org.example.Empty"] == [:])

                // Not an object manager's reply: a typed error naming both signatures, and nothing handed over.
                let impostor = try DBusMessage.methodCall(
                    destination: nil, path: "/x", interface: nil, member: "GetManagedObjects")
                try impostor.appendArguments([.array(element: "s", [.string("no")])])
                var handed = 0
                #expect {
                    try impostor.forEachManagedObject { _, _, _ in handed += 1 }
                } throws: { error in
                    guard let error = error as? DBusError else { return false }
                    return error.code == .typeMismatch && "\(error)".contains("a{oa{sa{sv}}}")
                        && "\(error)".contains("as")
                }
                #expect(handed == 0)
            }
        }
    }
}
