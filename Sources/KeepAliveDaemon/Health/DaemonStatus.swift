/// What the daemon tells systemd in `STATUS=` (shown by `systemctl status keepalive`): what it polls, and
/// whatever is wrong with the daemon itself (a stalled scheduler) or with an adapter (the healing ladder gave
/// up on it) or with where its records go (a sink that cannot write). One line; the problems first, so a truncated
/// display still shows them.
public struct DaemonStatus: Sendable, Hashable {
    /// What it does when all is well, e.g. "polling 5 devices every 30s".
    public var polling: String
    /// How late the scheduler is, while the watchdog withholds `WATCHDOG=1`.
    public var stalledBy: Duration?
    /// Adapters reported unhealthy, with why.
    public var unhealthyAdapters: [String: String] = [:]
    /// Record sinks that cannot write now (`the MQTT spool`, `the output file`), with why; their records are lost
    /// meanwhile.
    public var failingSinks: [String: String] = [:]

    public init(polling: String) {
        self.polling = polling
    }

    /// Nothing wrong: neither stalled, nor an unhealthy adapter, nor a sink that cannot write.
    public var isHealthy: Bool {
        stalledBy == nil && unhealthyAdapters.isEmpty && failingSinks.isEmpty
    }

    /// The `STATUS=` text.
    public var text: String {
        var problems: [String] = []
        if let stalledBy {
            problems.append("stalled: the scheduler is \(stalledBy.compact) behind, watchdog pings withheld")
        }
        for adapter in unhealthyAdapters.keys.sorted() {
            problems.append("\(adapter) unhealthy: \(unhealthyAdapters[adapter] ?? "")")
        }
        for sink in failingSinks.keys.sorted() {
            problems.append("\(sink) cannot write, records are lost: \(failingSinks[sink] ?? "")")
        }
        return problems.isEmpty ? polling : problems.joined(separator: "; ") + " — " + polling
    }
}
