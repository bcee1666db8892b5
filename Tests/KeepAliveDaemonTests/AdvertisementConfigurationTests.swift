import KeepAliveDaemon
import Polling
import Readings
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `advertisements:`, `key:`, `key_file:` and `poll_when:` (issue #36): passive sensors and gated polls as the
/// engine gets them, and each mistake refused where it is written, never showing a key.
@Suite("Advertisement configuration")
struct AdvertisementConfigurationTests {
    static let key = "231d39c1d7cc1ab1aee224cd096db932"

    func parse(_ text: String, file: String = "test.yaml") throws(ConfigurationError) -> DaemonConfiguration {
        try ConfigurationLoader.parse(text, file: file)
    }

    @Test func passiveSensorsAndGatedPollsBecomeTheirSpecs() throws {
        let configuration = try parse(
            """
            poll_when: heard
            devices:
              - name: porch
                address: A4:C1:38:00:00:01
                advertisements: bthome
                key: \(Self.key)
              - {name: kitchen, address: A4:C1:38:00:00:02, advertisements: auto}
              - {name: tag, address: C0:FF:EE:00:00:03, advertisements: ruuvi}
              - {name: shed, address: C0:FF:EE:00:00:04, read: [2a19]}
              - {name: pump, address: C0:FF:EE:00:00:05, read: [2a19], poll_when: always}

            """)
        let specs = configuration.peripheralSpecs()
        #expect(specs.map(\.isPassive) == [true, true, true, false, false])
        #expect(specs[0].advertising == .init(format: .bthome, key: try AdvertisementKey(hex: Self.key)))
        #expect(specs[1].advertising == .init(format: nil))
        #expect(specs[2].advertising?.format == .ruuviRAWv2)
        // The file's poll_when for polled devices; a passive sensor is never polled.
        #expect(specs.map(\.pollWhen) == [.always, .always, .always, .heard, .always])
    }

    @Test func aKeyFileIsReadRelativeToTheConfiguration() throws {
        let directory = "/tmp/keepalive-keyfile-\(getpid())"
        mkdir(directory, 0o700)
        defer {
            unlink("\(directory)/porch.key")
            rmdir(directory)
        }
        let file = fopen("\(directory)/porch.key", "w")
        fputs(" \(Self.key)\n", file)
        fclose(file)
        let configuration = try parse(
            "devices:\n  - {name: porch, address: A4:C1:38:00:00:01, advertisements: bthome, key_file: porch.key}\n",
            file: "\(directory)/keepalive.yaml")
        #expect(configuration.devices[0].advertising?.key == (try AdvertisementKey(hex: Self.key)))

        let missing = #expect(throws: ConfigurationError.self) {
            try parse(
                "devices:\n  - {name: porch, address: A4:C1:38:00:00:01, advertisements: bthome, key_file: gone.key}\n",
                file: "\(directory)/keepalive.yaml")
        }
        #expect(missing?.field == "devices[0].key_file")
        #expect(missing?.message.contains("\(directory)/gone.key") == true, "\(String(describing: missing))")
    }

    @Test(arguments: [
        (
            "devices:\n  - {name: a, address: A4:C1:38:00:00:01, advertisements: eddystone}\n", 2, 59,
            "devices[0].advertisements", "bthome, pvvx, atc1441, mibeacon, ruuvi or auto"
        ),
        (
            "devices:\n  - {name: a, address: A4:C1:38:00:00:01, advertisements: bthome, key: 1234}\n", 2, 72,
            "devices[0].key", "this one has 4 characters"
        ),
        (
            "devices:\n  - {name: a, address: A4:C1:38:00:00:01, read: [2a19], key: \(key)}\n", 2, 62,
            "devices[0].key", "add `advertisements: bthome`"
        ),
        (
            "devices:\n  - {name: a, address: A4:C1:38:00:00:01, advertisements: pvvx, key: \(key)}\n", 2, 70,
            "devices[0].key", "pvvx advertisements are not encrypted"
        ),
        (
            "devices:\n  - {name: a, address: A4:C1:38:00:00:01, advertisements: bthome, key: \(key), key_file: k}\n",
            2, 116, "devices[0].key_file", "give the key once"
        ),
        (
            "devices:\n  - {name: a, address: A4:C1:38:00:00:01, read: [2a19], poll_when: sometimes}\n", 2, 68,
            "devices[0].poll_when", "always (every tick) or heard"
        ),
        (
            "poll_when: 1\ndevices:\n  - {name: a, address: A4:C1:38:00:00:01, read: [2a19]}\n", 1, 12, "poll_when",
            "not a poll condition"
        ),
    ])
    func eachMistakeIsRefusedWhereItIsWritten(yaml: String, line: Int, column: Int, field: String, text: String) {
        let error = #expect(throws: ConfigurationError.self) { try parse(yaml) }
        #expect(
            error?.location == SourceLocation(file: "test.yaml", line: line, column: column),
            "\(String(describing: error))")
        #expect(error?.field == field, "\(String(describing: error))")
        #expect(error?.message.contains(text) == true, "\(String(describing: error))")
        #expect(error?.description.contains(Self.key) == false, "a key is never shown")
    }
}
