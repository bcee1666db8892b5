internal import YAML

// `adapter_power:` and `healing:` (issue #15): what the daemon may do to an adapter that stops working; each value
// checked where it is written.

extension ConfigurationLoader {
    static let healingKeys = [
        "enabled", "failing_rounds", "cooldown", "max_power_cycles_per_hour", "restart_bluetoothd",
        "max_restarts_per_hour",
        "retry_after",
    ]

    /// `on`: power on an adapter found powered off; `unmanaged` (the default): leave its power to the operator.
    static func adapterPower(_ node: YAMLNode, in document: Document) throws(ConfigurationError) -> Bool {
        // YAML 1.1 reads a bare `on` as a boolean: its text is still `on`.
        let word = try document.text(node, "adapter_power", expected: "`on` or `unmanaged`")
        switch word {
        case "on": return true
        case "unmanaged": return false
        default:
            throw document.error(
                .invalidValue, at: node, "adapter_power",
                """
                    expected `on` (power the adapter on whenever it is found off) or `unmanaged` (leave its power \
                    alone), found \(document.describe(node))
                    """
            )
        }
    }

    static func healing(_ node: YAMLNode, into policy: inout HealingPolicy, in document: Document)
        throws(ConfigurationError)
    {
        let fields = try Fields(
            node, path: "healing", allowed: healingKeys, in: document,
            expected: "a mapping like {max_power_cycles_per_hour: 3, restart_bluetoothd: false}"
        )
        for pair in fields.pairs {
            let value = pair.value
            let field = fields.field(pair.key)
            switch pair.key {
            case "enabled": policy.enabled = try document.boolean(value, field)
            case "failing_rounds": policy.failingRounds = try document.integer(value, field, in: 1...100)
            case "cooldown": policy.cooldown = try document.duration(value, field, allowZero: true)
            case "max_power_cycles_per_hour":
                policy.maxPowerCyclesPerHour = try document.integer(value, field, in: 0...60)
            case "restart_bluetoothd": policy.restartBluetoothd = try document.boolean(value, field)
            case "max_restarts_per_hour": policy.maxRestartsPerHour = try document.integer(value, field, in: 1...10)
            case "retry_after": policy.retryAfter = try document.duration(value, field)
            default: break  // `Fields` refused every other key.
            }
        }
    }
}
