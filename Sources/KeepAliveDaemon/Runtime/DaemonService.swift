import ServiceLifecycle

/// One of the daemon's parts as a `Service` of its `ServiceGroup`: a name for the group's log, and the work.
///
/// A part whose work ends before the group's graceful shutdown reaches it (a watchdog with no systemd to ping, a
/// fleet's binding that stopped) waits for that shutdown before it finishes: a `ServiceGroup` in the middle of a
/// graceful shutdown takes any service that finishes out of turn for a failure. A part that `ends` the group (the
/// scheduler) finishes with its work.
struct DaemonService: Service, CustomStringConvertible {
    let description: String
    private let endsGroup: Bool
    private let work: @Sendable () async -> Void

    init(_ name: String, endsGroup: Bool = false, _ work: @escaping @Sendable () async -> Void) {
        self.description = name
        self.endsGroup = endsGroup
        self.work = work
    }

    func run() async {
        await work()
        // Cancelled (the group is being torn down): nothing to wait for.
        if !endsGroup { try? await gracefulShutdown() }
    }
}
