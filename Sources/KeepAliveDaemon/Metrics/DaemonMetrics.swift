internal import Logging
internal import Basics

/// The daemon's metrics, with `metrics:`: the registry everything reports through, the textfile (a record sink),
/// and the HTTP endpoint once `Daemon.startMetricsEndpoint(closingOnFailure:)` bound it.
final class DaemonMetrics: Sendable {
    let registry: MetricsRegistry
    let textfile: MetricsTextfile?
    let listen: DaemonConfiguration.Metrics.Listen?
    let endpoint = Locked<MetricsEndpoint?>(nil)

    /// Writes the textfile once (a path that cannot be written fails the start).
    init(_ configuration: DaemonConfiguration.Metrics, logger: Logger) throws {
        let registry = MetricsRegistry()
        registry.gauge("keepalive_build_info", [("version", KeepAliveVersion.current)]).set(1.0)
        self.registry = registry
        textfile = try configuration.textfile.map { path throws(OutputError) in
            try MetricsTextfile(path: path, registry: registry, logger: logger)
        }
        listen = configuration.listen
    }
}
