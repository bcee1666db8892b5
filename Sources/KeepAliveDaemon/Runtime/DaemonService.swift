import ServiceLifecycle

/// One of the daemon's parts as a `Service` of its `ServiceGroup`: a name for the group's log, and the work,
/// which returns when the group's graceful shutdown reaches it (or when it has nothing to do).
struct DaemonService: Service, CustomStringConvertible {
    let description: String
    private let work: @Sendable () async -> Void

    init(_ name: String, _ work: @escaping @Sendable () async -> Void) {
        self.description = name
        self.work = work
    }

    func run() async {
        await work()
    }
}
