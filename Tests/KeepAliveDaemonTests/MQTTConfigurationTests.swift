import KeepAliveDaemon
import Testing

/// `mqtt:` in the configuration: the broker's URL forms, the defaults, and each mistake at its place.
@Suite("MQTT configuration")
struct MQTTConfigurationTests {
    func parse(_ mqtt: String) throws(ConfigurationError) -> DaemonConfiguration.MQTT? {
        try ConfigurationLoader.parse(
            mqtt + "\ndevices:\n  - {name: a, address: C0:FF:EE:00:00:01, read: [2a19]}\n", file: "test.yaml"
        ).mqtt
    }

    func failure(_ mqtt: String) -> ConfigurationError? {
        do {
            _ = try parse(mqtt)
            return nil
        } catch {
            return error
        }
    }

    @Test func theBrokerURLFormsAndTheDefaults() throws {
        let plain = try #require(try parse("mqtt:\n  broker: mqtt://broker.local"))
        #expect(plain.scheme == .plain && plain.host == "broker.local" && plain.port == 1883)
        #expect(
            plain.topicPrefix == "keepalive" && plain.qos == 1 && plain.discovery
                && plain.discoveryPrefix == "homeassistant")
        #expect(plain.offlineAfter == 3 && plain.spoolSize == 16 << 20 && plain.clientID == nil && plain.gateway == nil)
        let secure = try #require(try parse("mqtt:\n  broker: mqtts://broker.local"))
        #expect(secure.scheme == .tls && secure.port == 8883)
        let bare = try #require(try parse("mqtt:\n  broker: 127.0.0.1:18830"))
        #expect(bare.scheme == .plain && bare.host == "127.0.0.1" && bare.port == 18830)
        let six = try #require(try parse("mqtt:\n  broker: \"mqtt://[::1]:1884\""))
        #expect(six.host == "::1" && six.port == 1884 && six.brokerDescription == "mqtt://[::1]:1884")
        #expect(try parse("interval: 30s") == nil, "no mqtt: no bridge")
    }

    @Test func everySettingIsRead() throws {
        let mqtt = try #require(
            try parse(
                """
                mqtt:
                  broker: mqtts://broker.local:8884
                  client_id: keepalive-gw1
                  username: bridge
                  password_file: /etc/keepalive/mqtt-password
                  tls:
                    ca_file: /etc/keepalive/ca.pem
                    cert_file: /etc/keepalive/gw1.pem
                    key_file: /etc/keepalive/gw1.key
                  topic_prefix: sensors
                  gateway: greenhouse-pi
                  qos: 2
                  discovery: false
                  discovery_prefix: ha
                  spool: {path: /var/lib/keepalive/spool, size: 64MiB}
                  offline_after: 5
                """))
        #expect(
            mqtt
                == DaemonConfiguration.MQTT(
                    scheme: .tls, host: "broker.local", port: 8884, clientID: "keepalive-gw1", username: "bridge",
                    passwordFile: "/etc/keepalive/mqtt-password", caFile: "/etc/keepalive/ca.pem",
                    certificateFile: "/etc/keepalive/gw1.pem",
                    keyFile: "/etc/keepalive/gw1.key", topicPrefix: "sensors", gateway: "greenhouse-pi", qos: 2,
                    discovery: false,
                    discoveryPrefix: "ha", spoolPath: "/var/lib/keepalive/spool", spoolSize: 64 << 20, offlineAfter: 5,
                    location: mqtt.location
                ))
    }

    @Test(arguments: [
        ("mqtt:\n  broker: http://broker.local", 2, 11, "mqtt.broker", "unknown scheme"),
        ("mqtt:\n  broker: mqtt://broker.local:99999", 2, 11, "mqtt.broker", "port"),
        ("mqtt:\n  broker: mqtt://user:secret@broker.local", 2, 11, "mqtt.broker", "password_file"),
        ("mqtt:\n  broker: mqtt://broker.local\n  tls: {ca_file: /etc/ca.pem}", 3, 8, "mqtt.tls", "mqtts://"),
        ("mqtt:\n  broker: mqtts://broker.local\n  tls: {cert_file: /etc/c.pem}", 3, 8, "mqtt.tls", "key_file"),
        ("mqtt:\n  broker: mqtt://broker.local\n  topic_prefix: a/b", 3, 17, "mqtt.topic_prefix", "one topic level"),
        ("mqtt:\n  broker: mqtt://broker.local\n  qos: 3", 3, 8, "mqtt.qos", "0 to 2"),
        (
            "mqtt:\n  broker: mqtt://broker.local\n  password_file: secret.txt", 3, 18, "mqtt.password_file",
            "absolute path"
        ),
        ("mqtt:\n  broker: mqtt://broker.local\n  spool: {size: 1KiB}", 3, 17, "mqtt.spool.size", "too small"),
        ("mqtt:\n  broker: mqtt://broker.local\n  discovery: maybe", 3, 14, "mqtt.discovery", "true or false"),
        ("mqtt:\n  brokr: mqtt://broker.local", 2, 3, "mqtt.brokr", "did you mean `broker`"),
    ])
    func eachMistakeIsRefusedWhereItIsWritten(yaml: String, line: Int, column: Int, field: String, text: String) {
        let error = failure(yaml)
        #expect(
            error?.location == SourceLocation(file: "test.yaml", line: line, column: column),
            "\(String(describing: error))")
        #expect(error?.field == field, "\(String(describing: error))")
        #expect(error?.message.contains(text) == true, "\(String(describing: error))")
    }
}
