import LocalServices
import TestHarness
import Testing
@testable import MQTTBridge

@Suite struct TopicTests {
    @Test func namesBecomeSingleTopicLevels() {
        #expect(BridgeTopics.level("kitchen") == "kitchen")
        #expect(BridgeTopics.level("a/b+c#d") == "a_b_c_d")
        #expect(BridgeTopics.level("nul\u{0}tab\t") == "nul_tab_")
        #expect(BridgeTopics.level("") == "_")
        #expect(BridgeTopics.level("Küche 2") == "Küche 2")
        let topics = BridgeTopics(prefix: "keepalive", gateway: "pi/4")
        #expect(topics.state("x/y") == "keepalive/pi_4/x_y/state")
        #expect(topics.intervalSet("k") == "keepalive/pi_4/k/interval/set")
    }

    @Test func discoveryIdentifiersKeepOnlyWhatHomeAssistantAccepts() {
        #expect(BridgeTopics.identifier("Pi-4.local") == "pi-4_local")
        #expect(DiscoveryPayloads.addressIdentifier("AA:BB:CC:DD:EE:01") == "aabbccddee01")
    }
}

@Suite struct BridgeConfigurationTests {
    @Test func devicesSharingATopicLevelOrAnAddressAreRefused() throws {
        let directory = try makeTemporaryDirectory(prefix: "bridge-test")
        defer { removeDirectory(directory) }
        let configuration = bridgeConfiguration(port: 1, directory: directory)
        let slash = BridgeDevice(name: "a/b", address: "00:00:00:00:00:01", interval: .seconds(30))
        let plus = BridgeDevice(name: "a+b", address: "00:00:00:00:00:02", interval: .seconds(30))
        #expect(throws: BridgeError.self) {
            try MQTTBridge(configuration: configuration, devices: [slash, plus], logger: testLogger())
        }
        let twin = BridgeDevice(name: "twin", address: "aa:bb:cc:dd:ee:01", interval: .seconds(30))
        #expect(throws: BridgeError.self) {
            try MQTTBridge(configuration: configuration, devices: [kitchen, twin], logger: testLogger())
        }
    }
}
