import Foundation
@testable import DBus
import LocalServices
import TestHarness

/// Mutable state behind the echo service's properties and counters.
actor EchoState {
    var counter: UInt32 = 7
    var neverCalls = 0
    func setCounter(_ value: UInt32) { counter = value }
    func noteNever() { neverCalls += 1 }
}

/// The service the tests talk to: a connection of its own that owns `org.example.Echo` and exports
/// `/org/example/Echo` below an object manager at `/org/example`.
struct EchoService: Sendable {
    static let name = "org.example.Echo"
    static let path: ObjectPath = "/org/example/Echo"
    static let managerRoot: ObjectPath = "/org/example"
    static let interface = "org.example.Echo"
    static let errorName = "org.bluez.Error.Failed"
    static let errorText = "le-connection-abort-by-local"

    let connection: DBusConnection
    let state: EchoState

    static func start(on bus: PrivateBus) async throws -> EchoService {
        let connection = try await bus.connect()
        let state = EchoState()
        await connection.addObjectManager(at: managerRoot)
        try await connection.export(object(state), at: path)
        guard try await connection.requestName(name) == .primaryOwner else {
            throw PrivateBusError.setup("could not own \(name)")
        }
        return EchoService(connection: connection, state: state)
    }

    static func object(_ state: EchoState) -> DBusObject {
        DBusObject(interfaces: [
            DBusInterface(
                interface,
                methods: [
                    DBusMethod("Echo", in: nil, out: nil) { call in call.arguments },
                    DBusMethod("Ping") { _ in [] },
                    DBusMethod("Never") { _ in
                        await state.noteNever()
                        try await Task.sleep(for: .seconds(3600))
                        return []
                    },
                    DBusMethod("Fail") { _ in throw DBusError(name: errorName, message: errorText) },
                    DBusMethod("Sender", out: "s") { call in [.string(call.sender ?? "")] },
                    DBusMethod("Delayed", in: "u", out: "u", inNames: ["milliseconds"], outNames: ["same"]) { call in
                        let milliseconds = try call.arguments.decode(UInt32.self)
                        try await Task.sleep(for: .milliseconds(Int(milliseconds)))
                        return [.uint32(milliseconds)]
                    },
                    DBusMethod("EmitThenReply", in: "s", out: "s") { call in
                        let text = try call.arguments.decode(String.self)
                        try await call.connection.emitSignal(
                            path: call.path, interface: interface, member: "Event", arguments: [.string(text)])
                        return [.string("reply:" + text)]
                    },
                    DBusMethod("Emit", in: "osss") { call in
                        let (path, signalInterface, member, argument) = try call.arguments.decode(
                            ObjectPath.self, String.self, String.self, String.self)
                        try await call.connection.emitSignal(
                            path: path, interface: signalInterface, member: member, arguments: [.string(argument)])
                        return []
                    },
                ],
                properties: [
                    DBusProperty(
                        "Counter", signature: "u", get: { .uint32(await state.counter) },
                        set: { value in await state.setCounter(try value.decode(UInt32.self)) }),
                    DBusProperty("Label", signature: "s", get: { .string("echo") }),
                ],
                signals: [DBusSignalDeclaration("Event", signature: "s", names: ["text"])])
        ])
    }

    /// Calls a method of the echo object from `client`.
    static func call(
        _ client: DBusConnection, _ method: String, _ arguments: [DBusValue] = [], timeout: Duration = .seconds(25),
        cancellation: CallCancellation? = nil
    ) async throws -> [DBusValue] {
        try await client.call(
            destination: name, path: path, interface: interface, method: method, arguments: arguments,
            timeout: timeout, cancellation: cancellation)
    }
}
