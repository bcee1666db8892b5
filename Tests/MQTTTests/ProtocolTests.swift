import MQTT
import Testing

/// Against `FakeBroker`: behaviours a real mosquitto 2.0 does not show.
@Suite struct ProtocolTests {
    @Test func aBrokerThatRefusesMQTT5IsSpokenToIn311() async throws {
        let fake = try FakeBroker(.init(refusesMQTT5: true))
        defer { fake.stop() }
        let client = try MQTTClient(
            configuration: MQTTConfiguration(host: "127.0.0.1", port: fake.port, clientID: "old-broker"))
        let result = try await client.connect()
        #expect(result.protocolVersion == .v311)
        #expect(fake.connectLevels == [5, 4])
        await client.close()
    }

    @Test(arguments: [MQTTProtocolVersion.v5, .v311])
    func aRefusedSubscriptionIsATypedErrorNamingTheFilter(version: MQTTProtocolVersion) async throws {
        let fake = try FakeBroker(.init(refusesSubscriptions: true))
        defer { fake.stop() }
        let client = try MQTTClient(
            configuration: MQTTConfiguration(
                host: "127.0.0.1", port: fake.port, clientID: "refused", protocolVersion: version))
        try await client.connect()
        let error = await #expect(throws: MQTTError.self) { try await client.subscribe("forbidden/#") }
        #expect(error?.code == .subscriptionRefused)
        #expect(error?.message.contains("\"forbidden/#\"") == true)
        await client.close()
    }
}
