import LocalServices

/// A throwaway PKI for TLS tests, made with `openssl`: a CA, a server certificate it signs for `serverNames`,
/// and an unrelated second CA (`other-ca.crt`) for the refusal cases. Files: `ca.crt`, `ca.key`, `server.crt`,
/// `server.key`, `other-ca.crt` in `directory`. Valid two days.
public enum TestCertificates {
    public struct Failed: Error, CustomStringConvertible {
        public var description: String
    }

    public static func make(in directory: String, serverNames: String = "IP:127.0.0.1,DNS:localhost") async throws {
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try await run(
            ["openssl", "req", "-x509"] + key + [
                "-keyout", directory + "/ca.key", "-out", directory + "/ca.crt", "-days", "2", "-subj", "/CN=Test CA",
            ])
        try await run(
            ["openssl", "req", "-x509"] + key + [
                "-keyout", directory + "/other-ca.key", "-out", directory + "/other-ca.crt", "-days", "2",
                "-subj", "/CN=Other CA",
            ])
        try await run(
            ["openssl", "req"] + key + [
                "-keyout", directory + "/server.key", "-out", directory + "/server.csr", "-subj", "/CN=test broker",
            ])
        try TextFile.write("subjectAltName=\(serverNames)\nbasicConstraints=CA:FALSE\n", to: directory + "/server.ext")
        try await run([
            "openssl", "x509", "-req", "-in", directory + "/server.csr", "-CA", directory + "/ca.crt",
            "-CAkey", directory + "/ca.key", "-CAcreateserial", "-out", directory + "/server.crt", "-days", "2",
            "-extfile", directory + "/server.ext",
        ])
    }

    /// The mosquitto listener lines serving `directory`'s server certificate.
    public static func listener(_ directory: String) -> String {
        """
        allow_anonymous true
        cafile \(directory)/ca.crt
        certfile \(directory)/server.crt
        keyfile \(directory)/server.key
        """
    }

    private static func run(_ arguments: [String]) async throws {
        let output = try await Subprocess.run(arguments)
        guard output.status == 0 else {
            throw Failed(description: "\(arguments.joined(separator: " ")) → \(output.status): \(output.standardError)")
        }
    }
}
