import KeepAlive
import KeepAliveDaemon
import Testing

/// `adapter_power:` and `healing:`: documented defaults, every value checked where it is written.
@Suite("Healing configuration")
struct HealingConfigurationTests {
    let oneDevice = """
        devices:
          - name: a
            address: C0:FF:EE:00:00:01
            read: [2a19]

        """

    func failure(_ yaml: String) -> ConfigurationError? {
        do {
            _ = try ConfigurationLoader.parse(yaml, file: "test.yaml")
            return nil
        } catch {
            return error
        }
    }

    @Test func theDefaultsAreTheDocumentedOnes() throws {
        let configuration = try ConfigurationLoader.parse(oneDevice, file: "test.yaml")
        #expect(configuration.healing == HealingPolicy())
        let policy = configuration.healing
        #expect(policy.enabled && policy.failingRounds == 3 && policy.cooldown == .seconds(60))
        #expect(policy.maxPowerCyclesPerHour == 3 && !policy.restartBluetoothd && policy.maxRestartsPerHour == 1)
        #expect(policy.retryAfter == .seconds(3_600) && !policy.powerOn)
    }

    @Test func everyKeyIsRead() throws {
        let yaml = """
            adapter_power: on
            healing:
              enabled: true
              failing_rounds: 5
              cooldown: 0s
              max_power_cycles_per_hour: 1
              restart_bluetoothd: yes
              max_restarts_per_hour: 2
              retry_after: 30m

            """
        let policy = try ConfigurationLoader.parse(yaml + oneDevice, file: "test.yaml").healing
        #expect(
            policy
                == HealingPolicy(
                    enabled: true, failingRounds: 5, cooldown: .zero, maxPowerCyclesPerHour: 1, restartBluetoothd: true,
                    maxRestartsPerHour: 2,
                    retryAfter: .seconds(1_800), powerOn: true))
        #expect(
            try ConfigurationLoader.parse("adapter_power: unmanaged\n" + oneDevice, file: "test.yaml").healing.powerOn
                == false)
        #expect(
            try ConfigurationLoader.parse("healing: {enabled: false}\n" + oneDevice, file: "test.yaml").healing.enabled
                == false)
    }

    @Test func mistakesSayWhere() {
        let power = failure("adapter_power: always\n" + oneDevice)
        #expect(
            power?.description.hasPrefix("test.yaml:1:16: adapter_power: expected `on`") == true,
            "\(String(describing: power))")
        let rounds = failure("healing:\n  failing_rounds: 0\n" + oneDevice)
        #expect(
            rounds?.description.hasPrefix(
                "test.yaml:2:19: healing.failing_rounds: 0 is not a whole number from 1 to 100") == true,
            "\(String(describing: rounds))")
        let cooldown = failure("healing:\n  cooldown: 60\n" + oneDevice)
        #expect(
            cooldown?.description.hasPrefix("test.yaml:2:13: healing.cooldown:") == true,
            "\(String(describing: cooldown))")
        let typo = failure("healing:\n  max_power_cycles: 3\n" + oneDevice)
        #expect(typo?.kind == .unknownKey)
        #expect(typo?.description.contains("max_power_cycles_per_hour") == true, "\(String(describing: typo))")
        let restart = failure("healing:\n  restart_bluetoothd: sometimes\n" + oneDevice)
        #expect(
            restart?.description.hasPrefix("test.yaml:2:23: healing.restart_bluetoothd: expected true or false")
                == true, "\(String(describing: restart))")
        let notMapping = failure("healing: yes\n" + oneDevice)
        #expect(notMapping?.kind == .wrongType)
    }
}

extension HealingConfigurationTests {
    @Test func expectEveryBoundsANotificationsSilenceAndMustBeShorterThanTheListening() throws {
        let yaml = """
            devices:
              - name: a
                address: C0:FF:EE:00:00:01
                notify: [{uuid: 2a6e, for: 5s, expect_every: 2s}]

            """
        let configuration = try ConfigurationLoader.parse(yaml, file: "test.yaml")
        #expect(configuration.devices.first?.notifications.first?.silence == .seconds(2))
        let tooLong = failure(yaml.replacingOccurrences(of: "expect_every: 2s", with: "expect_every: 5s"))
        #expect(
            tooLong?.description.hasPrefix(
                "test.yaml:4:50: devices[0].notify[0].expect_every: expect_every 5s must be shorter than `for` (5s)")
                == true,
            "\(String(describing: tooLong))")
        let bare = failure(yaml.replacingOccurrences(of: "expect_every: 2s", with: "expect_every: 2"))
        #expect(bare?.kind == .badDuration)
    }
}
