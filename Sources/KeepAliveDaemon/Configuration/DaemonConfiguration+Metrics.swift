#if canImport(Glibc)
    internal import Glibc
#endif

/// The `metrics:` section: where the daemon exports its metrics. Absent: no registry, no thread, no file.
extension DaemonConfiguration {
    public struct Metrics: Sendable, Hashable {
        /// An address to serve `GET /metrics` on: a host (an IPv4 or IPv6 address, or a name) and a port (0: one
        /// the kernel picks, logged at start).
        public struct Listen: Sendable, Hashable, CustomStringConvertible {
            public var host: String
            public var port: Int

            public init(host: String, port: Int) {
                self.host = host
                self.port = port
            }

            /// `127.0.0.1:9464`, `[::1]:9464`.
            public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
        }

        /// node_exporter's textfile collector reads this file (`*.prom` in its directory), replaced atomically.
        public var textfile: String?
        /// The HTTP endpoint, for a Prometheus that scrapes the gateway itself.
        public var listen: Listen?

        public init(textfile: String? = nil, listen: Listen? = nil) {
            self.textfile = textfile
            self.listen = listen
        }
    }
}

extension DaemonConfiguration {
    /// `metrics.textfile`'s directory exists and this process may create files in it (the textfile is written
    /// beside itself, then renamed).
    func checkMetricsDirectory() throws(ConfigurationError) {
        guard let path = metrics?.textfile else { return }
        let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        guard access(directory.isEmpty ? "/" : directory, W_OK | X_OK) != 0 else { return }
        let reason = String(cString: strerror(errno))
        let origin = origins["metrics.textfile"]
        throw ConfigurationError(
            .invalidValue,
            at: origin?.location ?? SourceLocation(file: self.path ?? "DaemonConfiguration", line: 0, column: 0),
            field: "metrics.textfile",
            "cannot write files in `\(ConfigurationLoader.shown(directory))`: \(reason)")
    }
}
