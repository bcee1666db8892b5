// Kept apart: it needs libdbus's own constants, and CDBus has a C `DBusError` of its own.
import CDBus
import Testing
@testable import DBus
import DBusTesting

extension DBusTests {
    @Suite struct FileDescriptors {
        @Test func aReceivedUnixFdIsRefusedWithATypedError() throws {
            // No public API can build a message with a file descriptor (that is the point); build one with
            // libdbus directly to check the reading side.
            let message = try DBusMessage.methodCall(destination: nil, path: "/", interface: nil, member: "Echo")
            var iterator = MessageIterator()
            libdbus_message_iter_init_append(message.pointer, &iterator)
            #expect(libdbus_message_iter_append_basic(&iterator, CDBUS_TYPE_UNIX_FD, Int32(0)))
            let error = #expect(throws: DBus.DBusError.self) { try message.arguments() }
            #expect(error?.code == .unsupportedType)
            #expect(error?.message.contains("'h'") == true)
        }

        @Test func aUnixFdIsRefusedWhenSending() async throws {
            try await PrivateBus.with { bus in
                let client = try await bus.connect()
                let error = await #expect(throws: DBus.DBusError.self) {
                    _ = try await client.call(destination: "org.freedesktop.DBus", path: "/", interface: nil,
                                              method: "Ping", arguments: [.variant(.array(element: "h", []))])
                }
                #expect(error?.code == .unsupportedType)
            }
        }
    }
}
