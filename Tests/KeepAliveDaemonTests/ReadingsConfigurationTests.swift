import Foundation
import KeepAlive
import Polling
import KeepAliveDaemon
import Readings
import Testing

/// Readings in the configuration: `fields:` layouts, reading names, profiles and their overrides; every
/// mistake refused at its own line and column.
@Suite("Readings configuration")
struct ReadingsConfigurationTests {
    func failure(_ yaml: String) -> ConfigurationError? {
        do {
            _ = try ConfigurationLoader.parse(yaml, file: "test.yaml")
            return nil
        } catch {
            return error
        }
    }

    func expectFailure(
        _ yaml: String, line: Int, column: Int, field: String, containing text: String,
        sourceLocation: Testing.SourceLocation = #_sourceLocation
    ) {
        guard let error = failure(yaml) else {
            Issue.record("expected an error, but the configuration parsed", sourceLocation: sourceLocation)
            return
        }
        #expect(
            error.location == SourceLocation(file: "test.yaml", line: line, column: column), "\(error)",
            sourceLocation: sourceLocation)
        #expect(error.field == field, "\(error)", sourceLocation: sourceLocation)
        #expect(error.message.contains(text), "\(error)", sourceLocation: sourceLocation)
    }

    let plant = try! BluetoothUUID("00001a01-0000-1000-8000-00805f9b34fb")

    @Test func aVendorLayoutIsParsedIntoFields() throws {
        let configuration = try ConfigurationLoader.parse(
            """
            devices:
              - name: fern
                address: C0:FF:EE:01:00:01
                read:
                  - uuid: 00001a01-0000-1000-8000-00805f9b34fb
                    size: 16
                    fields:
                      - {name: temperature, at: 0, format: sint16le, scale: 0.1, unit: °C, valid: [-40, 80]}
                      - {name: light, at: 3, format: uint32le, unit: lx}
                      - {name: moisture, at: 7, format: uint8, unit: "%"}
                  - {uuid: 4b410102-6b65-6570-616c-697665000000, name: probe_temperature}
                  - 2a19
            """, file: "test.yaml")
        let device = try #require(configuration.devices.first)
        let layout = try #require(device.decoding[plant]?.layout)
        #expect(layout.size == 16)
        #expect(layout.fields.map(\.name) == ["temperature", "light", "moisture"])
        #expect(
            layout.fields[0]
                == Field(
                    name: "temperature", at: 0, format: .sint16le, scale: try Scale(parsing: "0.1"), unit: "°C",
                    valid: ValidRange(minimum: -40, maximum: 80)))
        #expect(device.decoding[try BluetoothUUID("4b410102-6b65-6570-616c-697665000000")]?.name == "probe_temperature")
        #expect(device.decoding[BluetoothUUID(assigned: 0x2A19)] == nil, "a bare UUID keeps the SIG table")
        #expect(configuration.peripheralSpecs().first?.decoding == device.decoding)
    }

    @Test func eachLayoutMistakeIsRefusedWhereItIsWritten() {
        func device(_ field: String, size: String = "") -> String {
            """
            devices:
              - name: fern
                address: C0:FF:EE:01:00:01
                read:
                  - uuid: 1a01\(size)
                    fields:
                      - \(field)
            """
        }
        expectFailure(
            device("{name: t, at: 0, format: sint12le}"), line: 7, column: 38,
            field: "devices[0].read[0].fields[0].format", containing: "sint12le")
        expectFailure(
            device("{name: light, at: 3, format: uint32le}", size: "\n        size: 5"), line: 8, column: 31,
            field: "devices[0].read[0].fields[0].at", containing: "past the payload's declared size of 5")
        expectFailure(
            device("{name: firmware, at: 2, format: utf8, unit: V}"), line: 7, column: 57,
            field: "devices[0].read[0].fields[0].unit", containing: "utf8")
        expectFailure(
            device("{name: Temperature, at: 0, format: uint8}"), line: 7, column: 20,
            field: "devices[0].read[0].fields[0].name", containing: "not a reading name")
        expectFailure(
            device("{name: t, at: 0, format: uint8, valid: [10, 0]}"), line: 7, column: 52,
            field: "devices[0].read[0].fields[0].valid", containing: "above the maximum")
        expectFailure(
            device("{name: t, at: 0, format: uint8, scale: 0}"), line: 7, column: 52,
            field: "devices[0].read[0].fields[0].scale", containing: "scale")
        expectFailure(
            device("{name: t, at: 0, format: uint8, colour: red}"), line: 7, column: 45,
            field: "devices[0].read[0].fields[0].colour", containing: "unknown key")
    }

    @Test func aReadingNameUsedTwiceOnADeviceNamesBothPlaces() {
        expectFailure(
            """
            devices:
              - name: fern
                address: C0:FF:EE:01:00:01
                read:
                  - 2a6e
                  - uuid: 1a01
                    fields:
                      - {name: temperature, at: 0, format: sint16le, scale: 0.1, unit: °C}
            """,
            line: 8, column: 20, field: "devices[0].read[1]",
            containing: "also given by devices[0].read[0] at test.yaml:5:9"
        )
    }

    @Test func aProfileBringsItsOperationsAndItsFieldsCanBeOverridden() throws {
        let configuration = try ConfigurationLoader.parse(
            """
            devices:
              - name: fern
                address: C0:FF:EE:01:00:01
                profile: mi-flora
                fields:
                  temperature: {offset: -0.5}
                  moisture: {valid: [5, 95]}
            """, file: "test.yaml")
        let device = try #require(configuration.devices.first)
        #expect(device.profile == "mi-flora")
        #expect(device.manufacturer == "Xiaomi")
        #expect(
            device.writes == [.init(characteristic: try BluetoothUUID("1a00"), value: [0xA0, 0x1F], type: .request)])
        #expect(device.reads == [try BluetoothUUID("1a01"), try BluetoothUUID("1a02")])
        let fields = try #require(device.decoding[plant]?.layout?.fields)
        #expect(fields.first { $0.name == "temperature" }?.offset == -0.5)
        #expect(fields.first { $0.name == "moisture" }?.valid == ValidRange(minimum: 5, maximum: 95))
    }

    @Test func profileMistakesAreRefusedWhereTheyAreWritten() {
        expectFailure(
            """
            devices:
              - name: fern
                address: C0:FF:EE:01:00:01
                profile: mi-flowra
            """, line: 4, column: 14, field: "devices[0].profile", containing: "did you mean `mi-flora`"
        )
        expectFailure(
            """
            devices:
              - name: fern
                address: C0:FF:EE:01:00:01
                profile: mi-flora
                fields:
                  humidity: {offset: 1}
            """, line: 6, column: 7, field: "devices[0].fields.humidity", containing: "no field `humidity`"
        )
        expectFailure(
            """
            devices:
              - name: fern
                address: C0:FF:EE:01:00:01
                profile: mi-flora
                fields:
                  firmware: {unit: V}
            """, line: 6, column: 24, field: "devices[0].fields.firmware.unit",
            containing: "makes no sense on a utf8 field"
        )
        // The profile listens 10 s; a 5-s budget cannot hold that: reported at the device's `profile:`.
        expectFailure(
            """
            devices:
              - name: room
                address: C0:FF:EE:01:00:02
                budget: 5s
                profile: lywsd03mmc
            """, line: 5, column: 14,
            field: "devices[0].profile (lywsd03mmc: notify[0].for at Profiles/lywsd03mmc.yaml:19:10)",
            containing: "shorter than the device's window budget 5s"
        )
    }

    @Test func everyShippedProfileParsesAndEveryFileIsEmbedded() throws {
        let profiles = try DeviceProfile.builtIn().get()
        #expect(
            Set(profiles.map(\.name)) == [
                "battery", "environmental-sensing", "health-thermometer", "heart-rate", "lywsd03mmc", "mi-flora",
            ])
        for profile in profiles {
            #expect(!profile.readings.isEmpty, "\(profile.name)")
            #expect(profile.file == "Profiles/\(profile.name).yaml")
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let listed = try FileManager.default.contentsOfDirectory(
            atPath: root.appendingPathComponent("Sources/KeepAliveDaemon/Profiles").path)
        #expect(
            Set(listed) == Set(profiles.map { "\($0.name).yaml" }),
            "a profile file that is not embedded (EmbeddedProfiles.files)")
    }
}
