internal import CoreMetrics
internal import DBus
internal import Logging
internal import MQTTBridge
internal import Basics
internal import ServiceLifecycle

extension Daemon {
    /// The daemon's metrics, or `nil` without `metrics:` (then nothing is made: no registry, no thread, no file).
    static func makeMetrics(_ configuration: DaemonConfiguration, logger: Logger) throws -> DaemonMetrics? {
        guard let metrics = configuration.metrics else { return nil }
        do {
            return try DaemonMetrics(metrics, logger: logger)
        } catch {
            throw DaemonError(description: "metrics.textfile: \(error)")
        }
    }

    /// Where the engine, the bridge, the fleet and the healer report: the registry, or swift-metrics' no-op.
    var metricsFactory: any MetricsFactory {
        metrics?.registry ?? NOOPMetricsHandler.instance
    }

    /// Adds the collectors of what is read rather than reported (the adapters' health, the spool), then binds
    /// the HTTP endpoint with `listen:` and logs the address it got (port 0 picks one). When it cannot bind, the
    /// start fails and `connection` is closed: `run()` throws before anything else would close it.
    func startMetricsEndpoint(closingOnFailure connection: DBusConnection) async throws {
        guard let metrics else { return }
        addCollectors(to: metrics.registry)
        guard let listen = metrics.listen else { return }
        do {
            let endpoint = try await MetricsEndpoint.start(
                host: listen.host, port: listen.port, registry: metrics.registry)
            metrics.endpoint.withLock { $0 = endpoint }
            logger.notice(
                "metrics: serving GET /metrics", metadata: ["listen": "\(endpoint.boundAddress)"])
        } catch {
            await connection.close()
            throw DaemonError(description: "metrics.listen \(listen): \(error)")
        }
    }

    /// The metrics' part of the service group, stopped last (it is the first part): at the graceful shutdown, once
    /// every record is written and the bridge has drained, the textfile is written a last time and the endpoint
    /// closes.
    func runMetrics(_ metrics: DaemonMetrics) async {
        try? await gracefulShutdown()
        if let failure = metrics.textfile?.write() {
            logger.warning("cannot write the metrics textfile", metadata: ["error": "\(failure)"])
        }
        if let endpoint = metrics.endpoint.withLock({ $0 }) { await endpoint.stop() }
    }

    private func addCollectors(to registry: MetricsRegistry) {
        let adapters = configuration.adapters
        let healthy = adapters.map { registry.gauge("keepalive_adapter_healthy", [("adapter", $0)]) }
        let board = statusBoard
        registry.addCollector {
            let unhealthy = board.withLock { $0.unhealthyAdapters }
            for (adapter, gauge) in zip(adapters, healthy) { gauge.set(unhealthy[adapter] == nil ? 1.0 : 0.0) }
        }
        guard let bridge else { return }
        let records = registry.gauge("keepalive_spool_records")
        let bytes = registry.gauge("keepalive_spool_bytes")
        let age = registry.gauge("keepalive_spool_oldest_age_seconds")
        let delivered = registry.counter("keepalive_mqtt_delivered")
        let dropped = registry.counter("keepalive_mqtt_dropped")
        let connected = registry.gauge("keepalive_mqtt_connected")
        registry.addCollector {
            let statistics = bridge.statistics
            records.set(Double(statistics.pending))
            bytes.set(Double(statistics.spoolBytes))
            delivered.set(Int64(clamping: statistics.delivered))
            dropped.set(Int64(clamping: statistics.dropped))
            connected.set(statistics.connected ? 1.0 : 0.0)
            let oldest = bridge.oldestPendingAge ?? .zero
            age.set(Double(oldest.components.seconds) + Double(oldest.components.attoseconds) * 1e-18)
        }
    }
}
