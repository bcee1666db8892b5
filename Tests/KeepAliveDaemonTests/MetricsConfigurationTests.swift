import KeepAliveDaemon
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `metrics:` in the configuration: a textfile, an endpoint, and each mistake at its place.
@Suite("Metrics configuration")
struct MetricsConfigurationTests {
    func parse(_ metrics: String) throws(ConfigurationError) -> DaemonConfiguration {
        try ConfigurationLoader.parse(
            metrics + "\ndevices:\n  - {name: a, address: C0:FF:EE:00:00:01, read: [2a19]}\n", file: "test.yaml")
    }

    func failure(_ metrics: String) -> ConfigurationError? {
        do {
            _ = try parse(metrics)
            return nil
        } catch {
            return error
        }
    }

    @Test func aTextfileAnEndpointOrBoth() throws {
        let both = try #require(
            try parse("metrics:\n  textfile: /var/lib/node_exporter/keepalive.prom\n  listen: 127.0.0.1:9464").metrics)
        #expect(both.textfile == "/var/lib/node_exporter/keepalive.prom")
        #expect(both.listen == .init(host: "127.0.0.1", port: 9464))
        let six = try #require(try parse("metrics: {listen: \"[::1]:9464\"}").metrics)
        #expect(six.listen == .init(host: "::1", port: 9464) && six.textfile == nil)
        #expect(six.listen?.description == "[::1]:9464")
        let anyPort = try #require(try parse("metrics: {listen: \"localhost:0\"}").metrics)
        #expect(anyPort.listen == .init(host: "localhost", port: 0))
        #expect(try parse("interval: 30s").metrics == nil, "no metrics: nothing exported")
    }

    @Test(arguments: [
        ("metrics:\n  listen: 127.0.0.1:99999", 2, 11, "metrics.listen", "0 to 65535"),
        ("metrics:\n  listen: 127.0.0.1", 2, 11, "metrics.listen", "HOST:PORT"),
        ("metrics:\n  listen: \"::1:9464\"", 2, 11, "metrics.listen", "brackets"),
        ("metrics:\n  listen: \"[::1\"", 2, 11, "metrics.listen", "closing `]`"),
        ("metrics:\n  listen: \"[::1]\"", 2, 11, "metrics.listen", "no port"),
        ("metrics:\n  listen: :9464", 2, 11, "metrics.listen", "no host"),
        ("metrics:\n  listen: 127.0.0.1:http", 2, 11, "metrics.listen", "0 to 65535"),
        ("metrics:\n  textfile: keepalive.prom", 2, 13, "metrics.textfile", "absolute path"),
        ("metrics:\n  textfile: /var/lib/node_exporter/", 2, 13, "metrics.textfile", "is a directory"),
        ("metrics:\n  textfil: /tmp/k.prom", 2, 3, "metrics.textfil", "did you mean `textfile`"),
        ("metrics:\n  port: 9464", 2, 3, "metrics.port", "metrics"),
        ("metrics: {}", 1, 10, "metrics", "textfile: PATH"),
        ("metrics: on", 1, 10, "metrics", "a mapping"),
    ])
    func eachMistakeIsRefusedWhereItIsWritten(yaml: String, line: Int, column: Int, field: String, text: String) {
        let error = failure(yaml)
        #expect(
            error?.location == SourceLocation(file: "test.yaml", line: line, column: column),
            "\(String(describing: error))")
        #expect(error?.field == field, "\(String(describing: error))")
        #expect(error?.message.contains(text) == true, "\(String(describing: error))")
    }

    /// The textfile is written beside itself then renamed: its directory must take new files, which `run` and
    /// `run --check` check before starting, at the line that names it.
    @Test func aTextfileInADirectoryThatCannotBeWrittenIsRefusedAtItsLine() throws {
        let configuration = try parse("interval: 30s\nmetrics:\n  textfile: /nonexistent-keepalive-dir/k.prom")
        do {
            try configuration.checkFiles()
            Issue.record("a textfile in a missing directory was accepted")
        } catch {
            #expect(error.location == SourceLocation(file: "test.yaml", line: 3, column: 13), "\(error)")
            #expect(error.field == "metrics.textfile" && error.message.contains("No such file"), "\(error)")
        }
        let fine = try parse("metrics:\n  textfile: /tmp/keepalive-test.prom")
        try fine.checkFiles()
    }
}
