import Testing
@testable import DBus
import LocalServices
import TestHarness

extension DBusTests {
    @Suite struct Signals {
        @Test func eachStreamGetsOnlyTheSignalsItsRuleMatches() async throws {
            try await PrivateBus.with { bus in
                let service = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let echo = EchoService.interface
                let other = "org.example.Other"
                let byPath = try await client.signals(matching: MatchRule(path: "/a", member: "Tick"))
                let byInterface = try await client.signals(matching: MatchRule(interface: other, member: "Tick"))
                let byArg0 = try await client.signals(matching: MatchRule(member: "Tick", arg0: "yes"))
                let byNamespace = try await client.signals(matching: MatchRule(pathNamespace: "/ns", member: "Tick"))

                let emissions: [(ObjectPath, String, String, String)] = [
                    ("/a", echo, "Tick", "yes"), ("/b", other, "Tick", "no"), ("/ns/deep", echo, "Tick", "no"),
                    ("/nsx", echo, "Tick", "yes"), ("/a", echo, "Tock", "yes"),
                    // One last signal for each stream alone.
                    ("/a", echo, "Tick", "end"), ("/b", other, "Tick", "end"), ("/c", echo, "Tick", "yes"),
                    ("/ns", echo, "Tick", "end"),
                ]
                for (path, interface, member, text) in emissions {
                    try await service.connection.emitSignal(
                        path: path, interface: interface, member: member, arguments: [.string(text)])
                }
                func summary(_ signals: [DBusSignal]) -> [String] {
                    signals.map { "\($0.path) \($0.arguments.first?.string ?? "")" }
                }
                #expect(
                    summary(try await collect(byPath) { $0.arguments.first == .string("end") })
                        == ["/a yes", "/a end"])
                #expect(
                    summary(try await collect(byInterface) { $0.arguments.first == .string("end") })
                        == ["/b no", "/b end"])
                #expect(summary(try await collect(byArg0) { $0.path == "/c" }) == ["/a yes", "/nsx yes", "/c yes"])
                #expect(
                    summary(try await collect(byNamespace) { $0.arguments.first == .string("end") })
                        == ["/ns/deep no", "/ns end"])
            }
        }

        @Test func aWellKnownSenderIsFollowedToWhicheverConnectionOwnsIt() async throws {
            try await PrivateBus.with { bus in
                let service = try await EchoService.start(on: bus)
                let other = try await bus.connect()
                let client = try await bus.connect()
                let stream = try await client.signals(
                    matching: MatchRule(sender: EchoService.name, member: "Tick"))
                let byUniqueName = try await client.signals(
                    matching: MatchRule(sender: other.uniqueName, member: "Tick"))
                func tick(_ connection: DBusConnection, _ text: String) async throws {
                    try await connection.emitSignal(
                        path: "/t", interface: "org.example.T", member: "Tick",
                        arguments: [.string(text)])
                }
                try await tick(other, "other-1")
                try await tick(service.connection, "service-1")
                var received = try await collect(stream) { $0.arguments.first == .string("service-1") }
                #expect(received.map(\.arguments) == [[.string("service-1")]])
                #expect(received.first?.sender == service.connection.uniqueName)

                // The name moves to `other`: now only its signals belong to the stream.
                try await service.connection.releaseName(EchoService.name)
                #expect(try await other.requestName(EchoService.name) == .primaryOwner)
                #expect(try await client.nameOwner(of: EchoService.name) == other.uniqueName)
                try await tick(service.connection, "service-2")
                try await tick(other, "other-2")
                received = try await collect(stream) { $0.arguments.first == .string("other-2") }
                #expect(received.map(\.arguments) == [[.string("other-2")]])

                let unique = try await collect(byUniqueName) { $0.arguments.first == .string("other-2") }
                #expect(unique.map(\.arguments) == [[.string("other-1")], [.string("other-2")]])
            }
        }

        @Test func endingAStreamRemovesItsMatchRuleFromTheBus() async throws {
            try await PrivateBus.with { bus in
                let service = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                func emitRound() async throws {
                    for _ in 0..<5 {
                        try await service.connection.emitSignal(
                            path: "/s", interface: "org.example.S", member: "Counted")
                    }
                    try await service.connection.emitSignal(path: "/s", interface: "org.example.S", member: "Sentinel")
                }
                do {
                    // While subscribed, all six signals reach this connection.
                    let counted = try await client.signals(matching: MatchRule(member: "Counted"))
                    let sentinel = try await client.signals(matching: MatchRule(member: "Sentinel"))
                    let before = await client.statistics.signalsReceived
                    try await emitRound()
                    _ = try await collect(sentinel) { _ in true }
                    #expect(await client.statistics.signalsReceived - before == 6)
                    withExtendedLifetime(counted) {}
                }
                // The streams are gone: RemoveMatch goes out, and the bus stops sending "Counted".
                try await waitUntil("the subscriptions are gone") { await client.subscriptions.isEmpty }
                let sentinel = try await client.signals(matching: MatchRule(member: "Sentinel"))
                try await client.ping(destination: "org.freedesktop.DBus")  // RemoveMatch was sent before this
                let before = await client.statistics.signalsReceived
                try await emitRound()
                _ = try await collect(sentinel) { _ in true }
                #expect(await client.statistics.signalsReceived - before == 1)
            }
        }

        @Test func nameOwnerChangesFollowANameComingAndGoing() async throws {
            try await PrivateBus.with { bus in
                let client = try await bus.connect()
                let owner = try await bus.connect()
                let changes = try await client.nameOwnerChanges(for: "org.example.Later")
                #expect(try await owner.requestName("org.example.Later") == .primaryOwner)
                try await owner.releaseName("org.example.Later")
                let received = try await withTimeout("two changes") {
                    var result: [NameOwnerChange] = []
                    for try await change in changes {
                        result.append(change)
                        if result.count == 2 { break }
                    }
                    return result
                }
                #expect(
                    received == [
                        NameOwnerChange(name: "org.example.Later", oldOwner: nil, newOwner: owner.uniqueName),
                        NameOwnerChange(name: "org.example.Later", oldOwner: owner.uniqueName, newOwner: nil),
                    ])
            }
        }

        @Test func aSignalEmittedBeforeTheReplyArrivesBeforeTheReply() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let events = try await client.signals(
                    matching: MatchRule(interface: EchoService.interface, member: "Event"))
                for round in 0..<20 {
                    let before = await client.statistics.signalsReceived
                    let reply = try await EchoService.call(client, "EmitThenReply", [.string("r\(round)")])
                    #expect(reply == [.string("reply:r\(round)")])
                    // The signal went through the filter before the reply resumed this task.
                    #expect(await client.statistics.signalsReceived == before + 1)
                }
                let received = try await collect(events) { $0.arguments.first == .string("r19") }
                #expect(received.count == 20)
            }
        }
    }
}
