import Foundation
import Testing
@testable import DBus
import LocalServices
import TestHarness

extension DBusTests {
    @Suite struct CommandLineClients {
        @Test func busctlCallsAnExportedMethodAndReadsAProperty() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let call = try await Subprocess.run([
                    "busctl", "--address=\(bus.address)", "call", EchoService.name, EchoService.path.rawValue,
                    EchoService.interface, "Echo", "sua{sv}", "hi", "5", "1", "k", "b", "true",
                ])
                #expect(call.status == 0, "\(call.standardError)")
                #expect(
                    call.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
                        == #"sua{sv} "hi" 5 1 "k" b true"#)
                let property = try await Subprocess.run([
                    "busctl", "--address=\(bus.address)", "get-property", EchoService.name, EchoService.path.rawValue,
                    EchoService.interface, "Counter",
                ])
                #expect(property.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "u 7")
                let failure = try await Subprocess.run([
                    "busctl", "--address=\(bus.address)", "call", EchoService.name, EchoService.path.rawValue,
                    EchoService.interface, "Fail",
                ])
                #expect(failure.status != 0)
                #expect(failure.standardError.contains(EchoService.errorText))
                let tree = try await Subprocess.run(["busctl", "--address=\(bus.address)", "tree", EchoService.name])
                #expect(
                    tree.standardOutput.contains("/org/example/Echo"), "\(tree.standardOutput)\(tree.standardError)")
            }
        }

        @Test func gdbusCallsAnExportedMethodTypedByOurIntrospection() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                // gdbus reads the argument type ("u") from our introspection XML to parse "5".
                let call = try await Subprocess.run([
                    "gdbus", "call", "--address", bus.address, "--dest", EchoService.name, "--object-path",
                    EchoService.path.rawValue, "--method", "\(EchoService.interface).Delayed", "5",
                ])
                #expect(call.status == 0, "\(call.standardError)")
                #expect(call.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "(uint32 5,)")
                let error = try await Subprocess.run([
                    "gdbus", "call", "--address", bus.address, "--dest", EchoService.name, "--object-path",
                    EchoService.path.rawValue, "--method", "\(EchoService.interface).Fail",
                ])
                #expect(error.status != 0)
                #expect(error.standardError.contains(EchoService.errorName))
            }
        }

        @Test func gdbusIntrospectParsesOurXMLIncludingChildNodes() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let root = try await Subprocess.run([
                    "gdbus", "introspect", "--address", bus.address, "--dest", EchoService.name, "--object-path",
                    EchoService.managerRoot.rawValue,
                ])
                #expect(root.status == 0, "\(root.standardError)")
                #expect(root.standardOutput.contains("interface org.freedesktop.DBus.ObjectManager"))
                #expect(root.standardOutput.contains("node Echo"), "\(root.standardOutput)")
                let echo = try await Subprocess.run([
                    "gdbus", "introspect", "--address", bus.address, "--dest", EchoService.name, "--object-path",
                    EchoService.path.rawValue,
                ])
                #expect(echo.status == 0, "\(echo.standardError)")
                #expect(echo.standardOutput.contains("interface org.example.Echo"))
                #expect(echo.standardOutput.contains("Delayed(in  u milliseconds,"), "\(echo.standardOutput)")
                #expect(echo.standardOutput.contains("readwrite u Counter"))
                #expect(echo.standardOutput.contains("Event(s text);"))
            }
        }

        @Test func theIntrospectionXMLIsWellFormed() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                for path in [ObjectPath.root, EchoService.managerRoot, EchoService.path] {
                    let reply = try await client.call(
                        destination: EchoService.name, path: path, interface: "org.freedesktop.DBus.Introspectable",
                        method: "Introspect")
                    let xml = try reply.decode(String.self)
                    let file = bus.directory + "/introspect.xml"
                    try xml.write(toFile: file, atomically: true, encoding: .utf8)
                    let lint = try await Subprocess.run(["xmllint", "--noout", file])
                    #expect(lint.status == 0, "\(path): \(lint.standardError)")
                }
            }
        }
    }
}
