import Basics
import Foundation
import KeepAlive
import Polling
import KeepAliveDaemon
import KeepAliveTesting
import Readings
import Testing

/// The YAML configuration loader: the example, one test per error class (exact kind, line, column and field),
/// the scalar forms, files on disk, and mutated input that must never trap.
@Suite("ConfigurationLoader")
struct ConfigurationLoaderTests {
    // MARK: - Helpers

    /// The error `yaml` is refused with, or `nil` when it parses.
    private func failure(_ yaml: String) -> ConfigurationError? {
        do {
            _ = try ConfigurationLoader.parse(yaml, file: "test.yaml")
            return nil
        } catch {
            return error
        }
    }

    /// Asserts `yaml` is refused with exactly this kind, place and field; returns the message for further checks.
    @discardableResult
    private func expectFailure(
        _ yaml: String, _ kind: ConfigurationError.Kind, line: Int, column: Int, field: String,
        sourceLocation: Testing.SourceLocation = #_sourceLocation
    ) -> String {
        guard let error = failure(yaml) else {
            Issue.record("expected a \(kind) error, but the configuration parsed", sourceLocation: sourceLocation)
            return ""
        }
        #expect(error.kind == kind, "\(error)", sourceLocation: sourceLocation)
        #expect(error.location.file == "test.yaml", sourceLocation: sourceLocation)
        #expect(error.location.line == line, "\(error)", sourceLocation: sourceLocation)
        #expect(error.location.column == column, "\(error)", sourceLocation: sourceLocation)
        #expect(error.field == field, "\(error)", sourceLocation: sourceLocation)
        return error.message
    }

    /// One valid device, for tests about the top level.
    private let oneDevice = """
        devices:
          - name: a
            address: C0:FF:EE:00:00:01
            read: [2a19]

        """

    private static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    // MARK: - The example

    @Test func exampleConfigurationParsesIntoTheSimulatorsTenSensors() throws {
        let configuration = try ConfigurationLoader.parse(ExampleConfiguration.yaml, file: "example.yaml")
        #expect(configuration.interval == .seconds(30))
        #expect(configuration.jitter == .seconds(2))
        #expect(configuration.windowBudget == .seconds(20))
        #expect(configuration.lowPower == LowPowerPolicy(lowPowerMultiplier: 2, critical: .pause))
        #expect(configuration.adapter == "hci0")
        #expect(configuration.maxConnections == 3)
        #expect(configuration.output == .standardOutput)
        #expect(configuration.adapters == ["hci0"])
        #expect(configuration.path == nil)

        let battery = BluetoothUUID(assigned: 0x2A19)
        let temperature = BluetoothUUID(assigned: 0x2A6E)
        let counter = try BluetoothUUID("4b410002-6b65-6570-616c-697665000000")
        let setting = try BluetoothUUID("4b410003-6b65-6570-616c-697665000000")
        func peripheral(_ last: Int) -> Peripheral { Peripheral(address: "C0:FF:EE:00:00:0\(last)", adapter: "hci0") }
        let counterLayout = PeripheralSpec.Decoding(
            layout: Layout(fields: [Field(name: "counter", at: 0, format: .uint32le)]))
        let expected = [
            PeripheralSpec(name: "greenhouse-north", peripheral: peripheral(1), reads: [battery, temperature]),
            PeripheralSpec(
                name: "greenhouse-south", peripheral: peripheral(2), reads: [battery, counter],
                decoding: [counter: counterLayout]),
            PeripheralSpec(
                name: "cold-room", peripheral: peripheral(3),
                writes: [.init(characteristic: setting, value: [0x01], type: .request)],
                reads: [setting, temperature],
                decoding: [setting: .init(name: "setting")]
            ),
            PeripheralSpec(name: "battery-bank", peripheral: peripheral(4), interval: .seconds(120), reads: [battery]),
            PeripheralSpec(
                name: "incubator", peripheral: peripheral(5), interval: .seconds(10), budget: .seconds(5),
                reads: [temperature],
                notifications: [.init(characteristic: counter, duration: .seconds(1))],
                decoding: [counter: counterLayout]
            ),
        ]
        let specs = configuration.peripheralSpecs()
        #expect(specs.count == 12)
        // The next five are the simulator's profile sensors, each by its profile.
        #expect(
            configuration.devices.dropFirst(5).prefix(5).map(\.profile) == [
                "mi-flora", "lywsd03mmc", "environmental-sensing", "heart-rate", "health-thermometer",
            ])
        #expect(configuration.devices.dropFirst(5).prefix(5).map(\.address) == (1...5).map { "C0:FF:EE:01:00:0\($0)" })
        // The last two are two of its advertising sensors: passive, one of them encrypted.
        #expect(specs.suffix(2).map(\.isPassive) == [true, true])
        #expect(specs.suffix(2).map(\.advertising?.format) == [.bthome, .mibeacon])
        #expect(specs.suffix(2).map { $0.advertising?.key != nil } == [false, true])
        for (spec, expectedSpec) in zip(specs, expected) {
            #expect(spec == expectedSpec)
        }
        // Each device's location is its entry's first key, `name`, after `  - `.
        let entryLines = ExampleConfiguration.yaml.split(separator: "\n", omittingEmptySubsequences: false)
            .enumerated().filter { $0.element.hasPrefix("  - name:") }.map { $0.offset + 1 }
        #expect(configuration.devices.map(\.location?.line) == entryLines)
        #expect(configuration.devices.map(\.location?.column) == Array(repeating: 5, count: 12))
    }

    @Test func examplesFileIsAByteIdenticalCopyOfTheExampleConfiguration() throws {
        let path = Self.repositoryRoot.appendingPathComponent("Examples/keepalive.yaml").path
        let bytes = try #require(FileManager.default.contents(atPath: path))
        #expect(bytes == Data(ExampleConfiguration.yaml.utf8))
        let loaded = try ConfigurationLoader.load(path: path)
        #expect(loaded.path == path)
        #expect(loaded.devices.count == 12)
    }

    // MARK: - One test per error class

    @Test func yamlSyntaxErrorsPointAtLibyamlsOneBasedPosition() {
        let message = expectFailure("interval: 30s\n  jitter: 2s\n", .syntax, line: 2, column: 9, field: "")
        #expect(message.contains("mapping values are not allowed"))
        // libyaml reports an unterminated flow sequence one line past the end: kept inside the file.
        expectFailure("devices: [a, b\n", .syntax, line: 1, column: 15, field: "")
        expectFailure("interval: 30s\n---\ninterval: 10s\n", .syntax, line: 2, column: 1, field: "")
        let alias = expectFailure("interval: *nowhere\n", .syntax, line: 1, column: 11, field: "")
        #expect(alias.contains("undefined alias"))
    }

    @Test func duplicateKeysAreReportedAtTheFirstUse() {
        let message = expectFailure(
            "interval: 30s\njitter: 1s\ninterval: 10s\n" + oneDevice, .syntax, line: 1, column: 1, field: ""
        )
        #expect(message.contains("`interval`"))
    }

    @Test func wrongTypesSayWhatWasExpectedAndWhatWasFound() {
        let message = expectFailure("interval: [30s]\n" + oneDevice, .wrongType, line: 1, column: 11, field: "interval")
        #expect(message == "expected a duration like 30s, found a sequence")
        let empty = expectFailure("interval:\n" + oneDevice, .wrongType, line: 1, column: 10, field: "interval")
        #expect(empty.hasSuffix("found an empty value"))
        expectFailure("- interval: 30s\n", .wrongType, line: 1, column: 1, field: "")
        expectFailure(
            """
            devices:
              - name: a
                address: C0:FF:EE:00:00:01
                read: 2a19
            """, .wrongType, line: 4, column: 11, field: "devices[0].read"
        )
        let quoted = expectFailure(
            "max_connections: \"3\"\n" + oneDevice, .wrongType, line: 1, column: 18, field: "max_connections"
        )
        #expect(quoted.contains("found the string \"3\""))
        expectFailure("output: !secret stdout\n" + oneDevice, .wrongType, line: 1, column: 9, field: "output")
        expectFailure("low_power: pause\n" + oneDevice, .wrongType, line: 1, column: 12, field: "low_power")
    }

    @Test func unknownKeysSuggestTheClosestKnownKey() {
        let message = expectFailure("intervl: 30s\n" + oneDevice, .unknownKey, line: 1, column: 1, field: "intervl")
        #expect(message.contains("did you mean `interval`?"))
        let nested = expectFailure(
            """
            devices:
              - name: a
                adress: C0:FF:EE:00:00:01
                read: [2a19]
            """, .unknownKey, line: 3, column: 5, field: "devices[0].adress"
        )
        #expect(nested.contains("did you mean `address`?"))
        let camel = expectFailure(
            "maxConnections: 3\n" + oneDevice, .unknownKey, line: 1, column: 1, field: "maxConnections"
        )
        #expect(camel.contains("did you mean `max_connections`?"))
        let far = expectFailure("colour: red\n" + oneDevice, .unknownKey, line: 1, column: 1, field: "colour")
        #expect(!far.contains("did you mean"))
        #expect(far.contains("known keys: interval"))
        let merge = expectFailure("<<: {interval: 30s}\n" + oneDevice, .unknownKey, line: 1, column: 1, field: "<<")
        #expect(merge.contains("merge keys"))
    }

    @Test func missingKeysPointAtTheMappingThatLacksThem() {
        let message = expectFailure(
            """
            interval: 30s
            devices:
              - name: a
                read: [2a19]
            """, .missingKey, line: 3, column: 5, field: "devices[0].address"
        )
        #expect(message.contains("needs `address:`"))
        expectFailure("interval: 30s\n", .missingKey, line: 1, column: 1, field: "devices")
        expectFailure("", .missingKey, line: 1, column: 1, field: "devices")
        expectFailure("# nothing but a comment\n", .missingKey, line: 1, column: 1, field: "devices")
        expectFailure(
            """
            devices:
              - name: a
                address: C0:FF:EE:00:00:01
                write:
                  - uuid: 2a06
                read: [2a19]
            """, .missingKey, line: 5, column: 9, field: "devices[0].write[0].value"
        )
    }

    @Test func badAddressesAreRefusedByBachk() {
        let fiveOctets = expectFailure(
            """
            devices:
              - name: a
                address: C0:FF:EE:00:00
                read: [2a19]
            """, .badAddress, line: 3, column: 14, field: "devices[0].address"
        )
        #expect(fiveOctets.contains("5 parts"))
        expectFailure(
            """
            devices:
              - name: a
                address: zz:FF:EE:00:00:01
                read: [2a19]
            """, .badAddress, line: 3, column: 14, field: "devices[0].address"
        )
    }

    @Test func addressesAreStoredUpperCased() throws {
        let lowerCase = oneDevice.replacingOccurrences(of: "C0:FF:EE", with: "c0:ff:ee")
        let configuration = try ConfigurationLoader.parse(lowerCase, file: "test.yaml")
        #expect(configuration.devices.first?.address == "C0:FF:EE:00:00:01")
    }

    @Test func badUUIDsNameTheirIndex() {
        let message = expectFailure(
            """
            devices:
              - name: a
                address: C0:FF:EE:00:00:01
                read: [2a19, 2a1z]
            """, .badUUID, line: 4, column: 18, field: "devices[0].read[1]"
        )
        #expect(message.contains("hexadecimal"))
        expectFailure(
            """
            devices:
              - name: a
                address: C0:FF:EE:00:00:01
                notify: [{uuid: 12345, for: 1s}]
            """, .badUUID, line: 4, column: 21, field: "devices[0].notify[0].uuid"
        )
    }

    @Test func badDurationsExplainTheFormat() {
        let spelledOut = expectFailure(
            "interval: 30 seconds\n" + oneDevice, .badDuration, line: 1, column: 11, field: "interval"
        )
        #expect(spelledOut.contains("`30s`"))
        let bare = expectFailure("interval: 30\n" + oneDevice, .badDuration, line: 1, column: 11, field: "interval")
        #expect(bare.contains("ambiguous") && bare.contains("`30s`"))
        let negative = expectFailure("jitter: -1s\n" + oneDevice, .badDuration, line: 1, column: 9, field: "jitter")
        #expect(negative.contains("negative"))
        expectFailure("interval: 0s\n" + oneDevice, .invalidValue, line: 1, column: 11, field: "interval")
        expectFailure("interval: 25h\n" + oneDevice, .invalidValue, line: 1, column: 11, field: "interval")
    }

    /// `min_interval` (issue #35): what an MQTT command may not set, the file may not give either, with the place of
    /// the value that breaks the floor: the device's interval, its own floor, else the file's.
    @Test func noIntervalIsShorterThanItsFloor() throws {
        let global = expectFailure("interval: 1s\n" + oneDevice, .invalidValue, line: 1, column: 11, field: "interval")
        #expect(global.contains("interval 1s is shorter than min_interval 5s (the default)"), "\(global)")
        let lowered = try ConfigurationLoader.parse("interval: 1s\nmin_interval: 1s\n" + oneDevice, file: "test.yaml")
        #expect(lowered.minInterval == .seconds(1) && lowered.interval == .seconds(1))
        let raised = expectFailure(
            "min_interval: 1m\n" + oneDevice, .invalidValue, line: 1, column: 15, field: "min_interval")
        #expect(raised.contains("longer than the interval 30s (the default)"), "\(raised)")
        let device = expectFailure(
            """
            min_interval: 3s
            devices:
              - name: a
                address: C0:FF:EE:00:00:01
                interval: 2s
                read: [2a19]
            """, .invalidValue, line: 5, column: 15, field: "devices[0].interval"
        )
        #expect(device.contains("shorter than min_interval 3s (line 1)"), "\(device)")
        // A device's own floor: lower for one that bears it, or higher than the interval it inherits.
        let own = try ConfigurationLoader.parse(
            """
            devices:
              - name: a
                address: C0:FF:EE:00:00:01
                interval: 2s
                min_interval: 1s
                read: [2a19]
            """, file: "test.yaml")
        #expect(own.minInterval(of: own.devices[0]) == .seconds(1) && own.minInterval == .seconds(5))
        let spared = expectFailure(
            """
            interval: 30s
            devices:
              - name: a
                address: C0:FF:EE:00:00:01
                min_interval: 1m
                read: [2a19]
            """, .invalidValue, line: 5, column: 19, field: "devices[0].min_interval"
        )
        #expect(spared.contains("longer than the interval 30s (line 1)"), "\(spared)")
        // The floor itself is a duration like any other: positive, at most 24h.
        expectFailure("min_interval: 0s\n" + oneDevice, .invalidValue, line: 1, column: 15, field: "min_interval")
        expectFailure("min_interval: 25h\n" + oneDevice, .invalidValue, line: 1, column: 15, field: "min_interval")
        expectFailure("min_interval: 5\n" + oneDevice, .badDuration, line: 1, column: 15, field: "min_interval")
    }

    @Test func aWindowBudgetNotShorterThanTheIntervalIsRefused() {
        expectFailure(
            "interval: 10s\nwindow_budget: 10s\n" + oneDevice,
            .invalidValue, line: 2, column: 16, field: "window_budget"
        )
        expectFailure("window_budget: 40s\n" + oneDevice, .invalidValue, line: 1, column: 16, field: "window_budget")
        expectFailure("interval: 10s\njitter: 10s\n" + oneDevice, .invalidValue, line: 2, column: 9, field: "jitter")
    }

    @Test func aDeviceBudgetNotShorterThanItsIntervalIsRefused() {
        expectFailure(
            """
            devices:
              - name: a
                address: C0:FF:EE:00:00:01
                interval: 10s
                budget: 10s
                read: [2a19]
            """, .invalidValue, line: 5, column: 13, field: "devices[0].budget"
        )
        // The file's window_budget applies to a device without its own budget.
        let message = expectFailure(
            """
            window_budget: 20s
            devices:
              - name: a
                address: C0:FF:EE:00:00:01
                interval: 15s
                read: [2a19]
            """, .invalidValue, line: 5, column: 15, field: "devices[0].interval"
        )
        #expect(message.contains("window_budget 20s"))
        // The derived budget (two thirds of 3s) never collides, but listening for longer than it does.
        expectFailure(
            """
            min_interval: 1s
            devices:
              - name: a
                address: C0:FF:EE:00:00:01
                interval: 3s
                notify: [{uuid: 2a6e, for: 2s}]
            """, .invalidValue, line: 6, column: 32, field: "devices[0].notify[0].for"
        )
    }

    @Test func duplicateDeviceNamesAreRefusedAtTheSecondUse() {
        let message = expectFailure(
            """
            devices:
              - name: a
                address: C0:FF:EE:00:00:01
                read: [2a19]
              - name: a
                address: C0:FF:EE:00:00:02
                read: [2a19]
            """, .invalidValue, line: 5, column: 11, field: "devices[1].name"
        )
        #expect(message.contains("devices[0] (line 2)"))
    }

    @Test func anAddressAppearsOncePerAdapter() throws {
        let twice = """
            devices:
              - name: a
                address: C0:FF:EE:00:00:01
                read: [2a19]
              - name: b
                address: c0:ff:ee:00:00:01
                read: [2a19]

            """
        expectFailure(twice, .invalidValue, line: 6, column: 14, field: "devices[1].address")
        let otherAdapter = twice + "    adapter: hci1\n"
        let configuration = try ConfigurationLoader.parse(otherAdapter, file: "test.yaml")
        #expect(configuration.adapters == ["hci0", "hci1"])
    }

    @Test func otherInvalidValuesAreRefused() {
        expectFailure("max_connections: 0\n" + oneDevice, .invalidValue, line: 1, column: 18, field: "max_connections")
        expectFailure(
            "max_connections: 99999999999999999999999999\n" + oneDevice,
            .invalidValue, line: 1, column: 18, field: "max_connections"
        )
        expectFailure("adapter: bt0\n" + oneDevice, .invalidValue, line: 1, column: 10, field: "adapter")
        expectFailure("output: \"\"\n" + oneDevice, .invalidValue, line: 1, column: 9, field: "output")
        expectFailure("devices: []\n", .invalidValue, line: 1, column: 10, field: "devices")
        let idle = expectFailure(
            """
            devices:
              - name: a
                address: C0:FF:EE:00:00:01
                read: []
            """, .invalidValue, line: 2, column: 5, field: "devices[0]"
        )
        #expect(idle.contains("does nothing"))
        expectFailure(
            """
            devices:
              - name: a
                address: C0:FF:EE:00:00:01
                write: [{uuid: 2a06, value: "01", type: reliable}]
            """, .invalidValue, line: 4, column: 45, field: "devices[0].write[0].type"
        )
    }

    // MARK: - Forms

    /// A configuration with one write of `value`.
    private func writing(_ value: String) -> String {
        """
        devices:
          - name: a
            address: C0:FF:EE:00:00:01
            write: [{uuid: 2a06, value: \(value)}]
        """
    }

    @Test(arguments: ["\"01ff\"", "\"0x01ff\"", "\"01:ff\"", "\"01 ff\"", "\"01FF\"", "0x01ff", "01:ff"])
    func writeValuesAreHexBytesInFourForms(value: String) throws {
        let configuration = try ConfigurationLoader.parse(writing(value), file: "test.yaml")
        #expect(configuration.devices.first?.writes.first?.value == [0x01, 0xFF])
    }

    @Test func anUnquotedWriteValueIsItsText() throws {
        // YAML reads `01` as the number 1; the loader keeps the digits as written.
        let configuration = try ConfigurationLoader.parse(writing("01"), file: "test.yaml")
        #expect(configuration.devices.first?.writes.first?.value == [0x01])
    }

    @Test(arguments: ["\"1ff\"", "\"01:f\"", "\"01:ff 02\"", "\"zz\"", "\"\"", "\"0x\"", "\"01::ff\""])
    func otherWriteValuesAreRefused(value: String) {
        expectFailure(writing(value), .invalidValue, line: 4, column: 33, field: "devices[0].write[0].value")
    }

    @Test func criticalPowerPausesOrStretches() throws {
        let stretch = try ConfigurationLoader.parse(
            "low_power: {multiplier: 1.5, critical: {stretch: 4}}\n" + oneDevice, file: "test.yaml"
        )
        #expect(stretch.lowPower == LowPowerPolicy(lowPowerMultiplier: 1.5, critical: .stretch(4)))
        let defaults = try ConfigurationLoader.parse("low_power: {}\n" + oneDevice, file: "test.yaml")
        #expect(defaults.lowPower == LowPowerPolicy())

        let bare = expectFailure(
            "low_power: {critical: stretch}\n" + oneDevice,
            .invalidValue, line: 1, column: 23, field: "low_power.critical"
        )
        #expect(bare.contains("{stretch: 4}"))
        expectFailure(
            "low_power: {multiplier: 0.5}\n" + oneDevice,
            .invalidValue, line: 1, column: 25, field: "low_power.multiplier"
        )
        expectFailure(
            "low_power: {multiplier: 1e300}\n" + oneDevice,
            .invalidValue, line: 1, column: 25, field: "low_power.multiplier"
        )
        expectFailure(
            "low_power: {multiplier: .inf}\n" + oneDevice,
            .invalidValue, line: 1, column: 25, field: "low_power.multiplier"
        )
        expectFailure(
            "low_power: {critical: {stretch: 0}}\n" + oneDevice, .invalidValue, line: 1, column: 33,
            field: "low_power.critical.stretch"
        )
        expectFailure(
            "low_power: {critical: {pause: 1}}\n" + oneDevice,
            .unknownKey, line: 1, column: 24, field: "low_power.critical.pause"
        )
    }

    @Test func anchorsAndAliasesShareValues() throws {
        let configuration = try ConfigurationLoader.parse(
            """
            devices:
              - name: a
                address: C0:FF:EE:00:00:01
                read: &sensors [2a19, 2a6e]
              - name: b
                address: C0:FF:EE:00:00:02
                read: *sensors
            """, file: "test.yaml"
        )
        #expect(configuration.devices.map(\.reads.count) == [2, 2])
    }

    @Test func errorsPrintAsFileLineColumnFieldMessage() {
        let error = failure("interval: 30\n" + oneDevice)
        #expect(error?.description.hasPrefix("test.yaml:1:11: interval: a bare number is ambiguous") == true)
    }

    // MARK: - Files

    @Test func aMissingFileIsUnreadableWithErrnosText() {
        let path = "/nonexistent/keepalive-\(UInt64.random(in: 0...UInt64.max)).yaml"
        do {
            _ = try ConfigurationLoader.load(path: path)
            Issue.record("a missing file loaded")
        } catch {
            #expect(error.kind == .unreadable)
            #expect(error.location == KeepAliveDaemon.SourceLocation(file: path, line: 1, column: 1))
            #expect(error.message.contains("No such file or directory"))
        }
    }

    @Test func aDirectoryOrNonUTF8FileIsRefused() throws {
        do {
            _ = try ConfigurationLoader.load(path: NSTemporaryDirectory())
            Issue.record("a directory loaded")
        } catch {
            #expect(error.kind == .unreadable)
        }
        let path = NSTemporaryDirectory() + "/keepalive-\(UInt64.random(in: 0...UInt64.max)).yaml"
        defer { try? FileManager.default.removeItem(atPath: path) }
        // `é` is two bytes in UTF-8: without its second one, the file ends in the middle of a character.
        let truncated = Data("interval: 30s\njitter: \u{e9}".utf8.dropLast(1))
        #expect(FileManager.default.createFile(atPath: path, contents: truncated))
        do {
            _ = try ConfigurationLoader.load(path: path)
            Issue.record("a file that is not UTF-8 loaded")
        } catch {
            #expect(error.kind == .syntax)
            #expect(error.location.line == 2)
            #expect(error.location.column == 9)
        }
    }

    // MARK: - Never trap

    @Test(arguments: [
        "devices: !!binary aGVsbG8=\n",
        "!!map {devices: [{name: a, address: C0:FF:EE:00:00:01, read: [2a19]}]}\n",
        "devices:\n  - &d {name: a, address: C0:FF:EE:00:00:01, read: [2a19]}\n  - *d\n",
        "devices:\n  - <<: {name: a}\n    address: C0:FF:EE:00:00:01\n",
        "? [devices]\n: 1\n",
        "? {a: 1}\n: 1\n",
        "~: 1\n",
        "devices: [{name: a, address: 10:20:30:40:50:59, read: [2a19]}]\n",
        "devices: [{name: 1e400, address: C0:FF:EE:00:00:01, read: [0x2a19]}]\n",
        "max_connections: 0x10\n",
        "max_connections: 1.0e1\n",
        "max_connections: -9223372036854775809\n",
        "low_power: {multiplier: 1_000_000}\n",
        "low_power: {multiplier: .nan}\n",
        "interval: 2001-01-01\n",
        "interval: \"\\0\"\n",
        "interval: 30s\u{0}\n",
        "\u{FEFF}interval: 30s\n",
        "interval:\t30s\n",
        "\tinterval: 30s\n",
        "interval: 30s\r\njitter: 1s\r\nbogus: 1\r\n",
        String(repeating: "[", count: 2000),
        String(repeating: "- ", count: 2000) + "x\n",
        "interval: " + String(repeating: "9", count: 10_000) + "s\n",
        "--- |\n  text\n",
        "%YAML 1.1\n---\ndevices: []\n",
        "%TAG ! tag:example.com,2000:\n---\ninterval: !x 30s\n",
        "devices:\n- name: a\n  address: C0:FF:EE:00:00:01\n"
            + "  write: [{uuid: 2a06, value: \"\(String(repeating: "ff", count: 600))\"}]\n",
        "devices:\n- name: \"\"\n  address: C0:FF:EE:00:00:01\n  read: [2a19]\n",
        "devices:\n- name: a\n  address: C0:FF:EE:00:00:01\n  read: [2a19]\n  notify: [{uuid: 2a19}]\n",
    ])
    func hostileInputsAreRefusedWithoutTrapping(yaml: String) {
        guard let error = failure(yaml) else { return }
        let lineCount = max(1, yaml.filter(\.isNewline).count + (yaml.last?.isNewline == true ? 0 : 1))
        #expect((1...lineCount).contains(error.location.line), "\(error)")
        #expect(error.location.column >= 1, "\(error)")
    }

    /// 500 variants in the suite (50 under ThreadSanitizer: `Sanitizers.rounds`); `KEEPALIVE_FUZZ_ITERATIONS` (CI:
    /// 100,000) for more. In four slices of their own seeds, which run side by side: one loop kept one core busy
    /// for most of CI's fuzzing stage while the other fuzzers were long done.
    @Test(arguments: 0..<4)
    func mutatedExamplesParseOrFailInsideTheFile(slice: Int) {
        let total = Sanitizers.rounds(
            ProcessInfo.processInfo.environment["KEEPALIVE_FUZZ_ITERATIONS"].flatMap(Int.init) ?? 500)
        let iterations = total / 4 + (slice < total % 4 ? 1 : 0)
        var generator = SeededRandomNumberGenerator(seed: 2024 + UInt64(slice))
        let original = ExampleConfiguration.yaml.split(separator: "\n", omittingEmptySubsequences: false)
            .map(String.init)
        var failures = 0
        for variant in 0..<iterations {
            var lines = original
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                guard !lines.isEmpty else { break }
                let index = Int.random(in: 0..<lines.count, using: &generator)
                switch Int.random(in: 0..<4, using: &generator) {
                case 0: lines.remove(at: index)
                case 1: lines.insert(lines[index], at: index)
                case 2:
                    // Cut a line short: unterminated quotes and brackets, keys without values.
                    let line = lines[index]
                    lines[index] = String(line.prefix(Int.random(in: 0...line.count, using: &generator)))
                default:
                    let other = Int.random(in: 0..<lines.count, using: &generator)
                    lines.swapAt(index, other)
                }
            }
            let text = lines.joined(separator: "\n")
            // As `wc -l` counts, plus an unterminated last line: a final newline does not start a line.
            // (`lines` holds no newline: the text has one between each two of them.)
            let lineCount = max(1, lines.count - 1 + (text.hasSuffix("\n") ? 0 : 1))
            let file = "variant-\(slice)-\(variant).yaml"
            do {
                _ = try ConfigurationLoader.parse(text, file: file)
            } catch {
                failures += 1
                #expect(error.location.file == file)
                #expect((1...lineCount).contains(error.location.line), "variant \(variant): \(error)")
                #expect(error.location.column >= 1, "variant \(variant): \(error)")
                #expect(!error.message.isEmpty)
            }
        }
        // Most mutations break something; if none did, the mutations are not reaching the loader.
        #expect(failures > iterations / 5)
        print(
            """
            config fuzz: slice \(slice + 1) of 4: \(iterations) variants of the example, \(failures) refused with \
            a place in the file, \(iterations - failures) accepted, 0 traps
            """
        )
    }
}

@Suite("Configuration loader: review findings")
struct ConfigurationReviewTests {
    @Test func aUUIDReadTwiceInAnyFormIsRefusedAtTheSecond() throws {
        let yaml =
            """
            devices:\n  - name: a\n    address: C0:FF:EE:00:00:01\n    read: [2a19, \
            00002a19-0000-1000-8000-00805f9b34fb]\n
            """
        let error = #expect(throws: ConfigurationError.self) { try ConfigurationLoader.parse(yaml, file: "k.yaml") }
        #expect(error?.kind == .invalidValue)
        #expect(error?.field == "devices[0].read[1]")
        #expect(error?.location.line == 4)
    }

    @Test func aCharacteristicListenedToTwiceIsRefused() throws {
        let yaml =
            """
            devices:\n  - name: a\n    address: C0:FF:EE:00:00:01\n    notify:\n      - {uuid: 2a6e, for: 1s}\n   \
               - {uuid: 2a6e, for: 2s}\n
            """
        let error = #expect(throws: ConfigurationError.self) { try ConfigurationLoader.parse(yaml, file: "k.yaml") }
        #expect(error?.field == "devices[0].notify[1].uuid")
        #expect(error?.location.line == 6)
    }

    @Test func anAddressWithAnEmbeddedNULIsRefused() throws {
        let yaml = "devices:\n  - name: a\n    address: \"C0:FF:EE:00:00:01\\0zz\"\n    read: [2a19]\n"
        let error = #expect(throws: ConfigurationError.self) { try ConfigurationLoader.parse(yaml, file: "k.yaml") }
        #expect(error?.kind == .badAddress)
        #expect(!HostBluetooth.isValidAddress("C0:FF:EE:00:00:01\0zz"))
    }

    @Test func powerModeAndCriticalLevelAreRead() throws {
        let yaml =
            """
            low_power: {mode: on, critical_below: 15}\ndevices:\n  - {name: a, address: C0:FF:EE:00:00:01, read: \
            [2a19]}\n
            """
        let configuration = try ConfigurationLoader.parse(yaml, file: "k.yaml")
        #expect(configuration.powerMode == .on)
        #expect(configuration.criticalPercentage == 15)
        let bad = "low_power: {mode: sometimes}\ndevices:\n  - {name: a, address: C0:FF:EE:00:00:01, read: [2a19]}\n"
        let error = #expect(throws: ConfigurationError.self) { try ConfigurationLoader.parse(bad, file: "k.yaml") }
        #expect(error?.field == "low_power.mode")
        #expect(error?.location.column == 19)
    }
}
