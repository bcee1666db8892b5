/// What the daemon tells systemd in `STATUS=` (shown by `systemctl status keepalive`): what it polls, and
/// whatever is wrong with the daemon itself (a stalled scheduler) or with an adapter (the healing ladder gave
/// up on it). One line; the problems first, so a truncated display still shows them.
public struct DaemonStatus: Sendable, Hashable {
    /// What it does when all is well, e.g. "polling 5 devices every 30s".
    public var polling: String
    /// How late the scheduler is, while the watchdog withholds `WATCHDOG=1`.
    public var stalledBy: Duration?
    /// Adapters reported unhealthy, with why.
    public var unhealthyAdapters: [String: String] = [:]

    public init(polling: String) {
        self.polling = polling
    }

    /// Nothing wrong: neither stalled nor an unhealthy adapter.
    public var isHealthy: Bool {
        stalledBy == nil && unhealthyAdapters.isEmpty
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
        return problems.isEmpty ? polling : problems.joined(separator: "; ") + " — " + polling
    }
}
