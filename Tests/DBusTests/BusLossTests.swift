import Testing
@testable import DBus

extension DBusTests {
    @Suite struct BusLoss {
        @Test func killingTheDaemonFailsPendingCallsAndEndsStreamsWithDisconnected() async throws {
            try await PrivateBus.with { bus in
                let service = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let stream = try await client.signals(matching: MatchRule(member: "NeverSent"))
                let streamEnd = Task { () -> (any Error)? in
                    do {
                        for try await _ in stream {}
                        return nil
                    } catch {
                        return error
                    }
                }
                let pending = Task { try await EchoService.call(client, "Never") }
                try await waitUntil("the service has the call") { await service.state.neverCalls == 1 }

                let clock = ContinuousClock()
                let start = clock.now
                try await bus.killDaemon()
                let callResult = try await withTimeout("the pending call fails") { await pending.result }
                let streamError = try await withTimeout("the stream ends") { await streamEnd.value }
                #expect(clock.now - start < .seconds(2))
                #expect(throws: DBusError.self) { try callResult.get() }
                if case .failure(let error as DBusError) = callResult { #expect(error.code == .disconnected) }
                #expect((streamError as? DBusError)?.code == .disconnected)
                #expect(await client.state == .disconnected)

                // Later calls fail at once.
                let again = clock.now
                let error = await #expect(throws: DBusError.self) { _ = try await EchoService.call(client, "Ping") }
                #expect(error?.code == .disconnected)
                #expect(clock.now - again < .milliseconds(100))
                await #expect(throws: DBusError.self) { _ = try await client.signals(matching: MatchRule()) }
            }
        }

        @Test func closeFailsPendingCallsAndLaterCalls() async throws {
            try await PrivateBus.with { bus in
                let service = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let pending = Task { try await EchoService.call(client, "Never") }
                try await waitUntil("the service has the call") { await service.state.neverCalls == 1 }
                await client.close()
                let result = try await withTimeout("the pending call fails") { await pending.result }
                if case .failure(let error as DBusError) = result {
                    #expect(error.code == .disconnected)
                } else {
                    Issue.record("expected .disconnected, got \(result)")
                }
                #expect(await client.state == .closed)
                await #expect(throws: DBusError.self) { _ = try await EchoService.call(client, "Ping") }
            }
        }

        @Test func connectingToANonexistentBusFailsWithConnectFailed() async throws {
            let error = await #expect(throws: DBusError.self) {
                _ = try await DBusConnection(bus: .address("unix:path=/nonexistent/dbus-test-socket"))
            }
            #expect(error?.code == .connectFailed)
        }
    }
}
