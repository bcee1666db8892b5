import LocalServices
import TestHarness
import Foundation
import Basics
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue #40 ("An unlucky day on a gateway"), items 6 and 7, through the binary against a real mosquitto (or a
/// listener that never answers): broker trouble is reported at once, for what it is, once; `keepalive fleet` presents
/// the configuration's credentials and says a refusal is no usage error.
@Suite("Broker trouble end to end", .serialized)
struct BrokerTroubleEndToEndTests {
    static let failure = "cannot connect to the MQTT broker; retrying"

    /// The log's lines about a failed connection to `port`, the summaries apart.
    static func failures(_ log: String, port: Int) -> (lines: [Substring], summaries: [Substring]) {
        let lines = log.split(separator: "\n").filter {
            $0.contains(failure) && $0.contains("broker=127.0.0.1:\(port)")
        }
        return (lines.filter { !$0.contains("…repeated") }, lines.filter { $0.contains("…repeated") })
    }

    /// How a summary counts `repeated` occurrences not logged.
    static func repeated(_ count: Int) -> String {
        count == 1 ? "…repeated once more in " : "…repeated \(count) times in "
    }

    /// `keepalive run` with `mqtt:` on `port` (`scheme` mqtt or mqtts, `extra` lines in the section) against the
    /// simulator, until `body` returns; then SIGTERM. Returns the whole log, read after the exit (the summaries a
    /// shutdown writes are in it).
    @discardableResult
    static func withDaemon(
        port: Int, scheme: String = "mqtt", extra: String = "",
        _ body: @Sendable (CommandProcess) async throws -> Void
    ) async throws -> String {
        try await CLITests.withSimulator(devices: 1) { bus, _ in
            let spool = try makeTemporaryDirectory(prefix: "keepalive-spool")
            defer { _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", spool]) }
            let yaml = """
                interval: 2s
                min_interval: 1s
                devices:
                  - {name: sensor-1, address: C0:FF:EE:00:00:01, read: [2a19]}
                mqtt:
                  broker: \(scheme)://127.0.0.1:\(port)
                  gateway: gw
                  spool: {path: \(spool)}
                \(extra)
                """
            let file = try TemporaryFile(name: "keepalive.yaml", contents: yaml)
            defer { file.remove() }
            let daemon = try CommandProcess(["run", "--config", file.path, "--bus", bus.address])
            defer { daemon.terminate() }
            try await body(daemon)
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(within: .seconds(15)) == 0, "\(daemon.standardError.suffix(2_000))")
            return daemon.standardError
        }
    }

    /// A listener that takes the connection and never answers CONNECT: said within seconds (it used to take the
    /// 60-s keep-alive, in silence), naming the broker and the bound, and tried again.
    @Test func aBrokerThatNeverAnswersCONNECTIsReportedWithinSecondsAndTriedAgain() async throws {
        let silent = try SilentListener()
        defer { silent.close() }
        try await Self.withDaemon(port: silent.port) { daemon in
            // The give-up is far below the keep-alive: the old report could not pass, nor could its text.
            try await waitUntil("the unanswered CONNECT logged", timeout: .seconds(20)) {
                !Self.failures(daemon.standardError, port: silent.port).lines.isEmpty
            }
            let line = try #require(Self.failures(daemon.standardError, port: silent.port).lines.first)
            #expect(
                line.contains(
                    "error=\"MQTTError.timeout(broker 127.0.0.1:\(silent.port) accepted the connection but did not "
                        + "answer CONNECT within 5s)\""), "\(line)")
            try await waitUntil("a second attempt after it", timeout: .seconds(20)) { silent.accepted >= 2 }
        }
    }

    /// `mqtts://` to mosquitto's plain port: the port is named as one without TLS (mosquitto closes at the
    /// ClientHello, which OpenSSL calls an unexpected end of file), not the certificate; the retries are folded into
    /// a summary, written at shutdown here since the broker never lets the daemon in.
    @Test func mqttsToAPlainPortSaysSoOnceAndFoldsTheRetries() async throws {
        let broker = try await MosquittoBroker.start()
        defer { broker.remove() }
        // The ClientHello read as an MQTT packet (the start-up check's own connection closes without a word).
        @Sendable func attempts() -> Int {
            broker.log.split(separator: "\n").filter { $0.contains("disconnected due to protocol error") }.count
        }
        let log = try await Self.withDaemon(port: broker.port, scheme: "mqtts") { _ in
            try await waitUntil("three attempts", timeout: .seconds(30)) { attempts() >= 3 }
        }
        let (lines, summaries) = Self.failures(log, port: broker.port)
        #expect(lines.count == 1, "\(lines)")
        let line = try #require(lines.first)
        #expect(
            line.contains(
                "MQTTError.tls(broker 127.0.0.1:\(broker.port) does not speak TLS on this port (plain MQTT, probably)"),
            "\(line)")
        #expect(!line.contains("certificate not trusted"), "\(line)")
        let summary = try #require(summaries.first, "\(log.suffix(2_000))")
        #expect(summary.contains("…repeated ") && summary.contains("error=MQTTError.tls "), "\(summary)")
    }

    /// A wrong password: one warning, the retries counted, and the summary when the broker takes the password
    /// (changed on the broker, reloaded with SIGHUP), just before the connection is logged. Delays are written as
    /// durations.
    @Test func aWrongPasswordIsLoggedOnceAndSummarisedWhenTheBrokerLetsTheDaemonIn() async throws {
        let directory = try makeTemporaryDirectory(prefix: "keepalive-auth")
        defer { _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", directory]) }
        let passwords = directory + "/passwords"
        let broker = try await MosquittoBroker.start(
            listener: try await MosquittoBroker.passwordListener(
                users: ["gateway": "right-secret"], passwordFile: passwords))
        defer { broker.remove() }
        let passwordFile = directory + "/mqtt-password"
        try "wrong-secret\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
        chmod(passwordFile, 0o600)
        @Sendable func refusals() -> Int {
            broker.log.split(separator: "\n").filter { $0.contains("disconnected, not authorised") }.count
        }
        let extra = "  username: gateway\n  password_file: \(passwordFile)\n"
        try await Self.withDaemon(port: broker.port, extra: extra) { daemon in
            try await waitUntil("three refusals", timeout: .seconds(30)) { refusals() >= 3 }
            try await broker.setPassword("wrong-secret", for: "gateway", in: passwords)
            try await waitUntil("connected with the password the broker now takes", timeout: .seconds(60)) {
                daemon.standardError.contains("connected to the MQTT broker")
            }
            let log = daemon.standardError
            let (lines, summaries) = Self.failures(log, port: broker.port)
            #expect(lines.count == 1, "\(lines)")
            let line = try #require(lines.first)
            #expect(line.contains("refused user \\\"gateway\\\"; CONNACK: Not authorized"), "\(line)")
            #expect(!log.contains("wrong-secret"))
            // `retry=850.3ms`, `retry=1.2s`: a duration, not `1.0841363733565383 seconds`.
            let retry = try #require(line.split(separator: " ").first { $0.hasPrefix("retry=") }?.dropFirst(6))
            #expect(retry.wholeMatch(of: /[0-9]+(\.[0-9]{1,2})?(ms|s)/) != nil, "\(line)")
            // Every refusal but the first, counted; the summary comes before the connection, which ended the count.
            let summary = try #require(summaries.first, "\(log.suffix(2_000))")
            #expect(summary.contains(Self.repeated(refusals() - 1)), "\(summary) after \(refusals()) refusals")
            #expect(summary.contains("error=MQTTError.notAuthorized first="), "\(summary)")
            let summaryAt = try #require(log.range(of: String(summary)))
            let connectedAt = try #require(log.range(of: "connected to the MQTT broker"))
            #expect(summaryAt.upperBound <= connectedAt.lowerBound)
        }
    }

    /// `keepalive fleet --config` connects as the configuration's user with its password file; a refusal or a
    /// broker that does not answer exits 69 (EX_UNAVAILABLE), not 64 (bad usage), naming what happened.
    @Test func keepaliveFleetUsesTheConfigurationsCredentialsAndARefusalIsNoUsageError() async throws {
        let directory = try makeTemporaryDirectory(prefix: "keepalive-auth")
        defer { _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", directory]) }
        let broker = try await MosquittoBroker.start(
            listener: try await MosquittoBroker.passwordListener(
                users: ["gateway": "right-secret"], passwordFile: directory + "/passwords"))
        defer { broker.remove() }
        let silent = try SilentListener()
        defer { silent.close() }
        @Sendable func fleet(port: Int, password: String) async throws -> (
            status: Int32, stdout: String, stderr: String
        ) {
            let passwordFile = directory + "/password-\(password)"
            try "\(password)\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
            chmod(passwordFile, 0o600)
            let yaml = """
                devices:
                  - {name: sensor-1, address: C0:FF:EE:00:00:01, read: [2a19]}
                mqtt:
                  broker: mqtt://127.0.0.1:\(port)
                  username: gateway
                  password_file: \(passwordFile)
                """
            let file = try TemporaryFile(name: "keepalive.yaml", contents: yaml)
            defer { file.remove() }
            return try await CommandProcess.run(["fleet", "--config", file.path, "--json", "--wait", "500ms"])
        }

        let allowed = try await fleet(port: broker.port, password: "right-secret")
        #expect(allowed.status == 0, "\(allowed.stderr)")
        #expect(
            (try? JSONSerialization.jsonObject(with: Data(allowed.stdout.utf8))) is [String: Any], "\(allowed.stdout)")

        let refused = try await fleet(port: broker.port, password: "wrong-secret")
        #expect(refused.status == 69, "\(refused.stderr)")
        #expect(
            refused.stderr.contains(
                "cannot connect to the MQTT broker: MQTTError.notAuthorized(broker 127.0.0.1:\(broker.port) refused "
                    + "user \"gateway\"; CONNACK: Not authorized)"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("Usage:") && !refused.stderr.contains("wrong-secret"), "\(refused.stderr)")

        let unanswered = try await fleet(port: silent.port, password: "right-secret")
        #expect(unanswered.status == 69, "\(unanswered.stderr)")
        #expect(unanswered.stderr.contains("did not answer CONNECT within 5s"), "\(unanswered.stderr)")
    }
}
