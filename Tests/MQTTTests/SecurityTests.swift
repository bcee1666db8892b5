import LocalServices
import TestHarness
import Foundation
import MQTT
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct SecurityTests {
    @Test func aWrongPasswordIsNotAuthorizedNamingBrokerAndUserButNotThePassword() async throws {
        let directory = try makeTemporaryDirectory()
        try await run(["mosquitto_passwd", "-b", "-c", directory + "/passwords", "bridge", "right-secret"])
        let broker = try await Broker.start(
            directory: directory, listener: "allow_anonymous false\npassword_file \(directory)/passwords")
        defer { broker.remove() }

        for version in [MQTTProtocolVersion.v5, .v311] {
            var settings = configuration(broker, protocolVersion: version)
            settings.credentials = .init(user: "bridge", password: "wrong-secret")
            let client = try MQTTClient(configuration: settings)
            let error = await #expect(throws: MQTTError.self) { try await client.connect() }
            #expect(error?.code == .notAuthorized)
            let text = error.map { "\($0)" } ?? ""
            #expect(text.contains("127.0.0.1:\(broker.port)"))
            #expect(text.contains("\"bridge\""))
            #expect(!text.contains("wrong-secret"))
            var dumped = ""
            dump(settings, to: &dumped)
            #expect(!"\(settings) \(String(reflecting: settings)) \(dumped)".contains("wrong-secret"))
            await client.close()
        }

        var settings = configuration(broker)
        settings.credentials = .init(user: "bridge", password: "right-secret")
        let client = try MQTTClient(configuration: settings)
        try await client.connect()
        try await client.publish(topic: "authorised", payload: [])
        await client.close()
    }

    @Test func readsAPasswordFileAndTellsWhetherItIsWorldReadable() throws {
        let directory = try makeTemporaryDirectory()
        defer { _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", directory]) }
        let path = directory + "/password"
        try "s3cret\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        let private_ = try MQTTClient.readPassword(from: path)
        #expect(private_.password == "s3cret")
        #expect(private_.worldReadable == false)
        chmod(path, 0o644)
        #expect(try MQTTClient.readPassword(from: path).worldReadable == true)
        let error = #expect(throws: MQTTError.self) { try MQTTClient.readPassword(from: directory + "/missing") }
        #expect(error?.code == .systemCall)
        #expect(error?.message.contains(directory + "/missing") == true)
    }

    @Test func tlsConnectsWithTheRightCAAndRefusesAnotherCA() async throws {
        let directory = try makeTemporaryDirectory()
        try await makeCertificates(in: directory)
        let broker = try await Broker.start(
            directory: directory,
            listener: """
                allow_anonymous true
                cafile \(directory)/ca.crt
                certfile \(directory)/server.crt
                keyfile \(directory)/server.key
                """)
        defer { broker.remove() }

        for host in ["127.0.0.1", "localhost"] {
            var settings = configuration(broker)
            settings.host = host
            settings.tls = .init(caFile: directory + "/ca.crt")
            let client = try MQTTClient(configuration: settings)
            try await client.connect()
            try await client.publish(topic: "tls/ok", payload: "secure".bytes, qos: .exactlyOnce)
            await client.close()
        }

        var wrong = configuration(broker)
        wrong.tls = .init(caFile: directory + "/other-ca.crt")
        let client = try MQTTClient(configuration: wrong)
        let error = await #expect(throws: MQTTError.self) { try await client.connect() }
        #expect(error?.code == .tls)
        #expect(error?.description.contains("127.0.0.1:\(broker.port)") == true)
        #expect(error?.libraryText?.contains("certificate verify failed") == true)
        #expect(error?.message.contains("does not speak TLS") == false, "a TLS broker is not called plain")
        await client.close()
    }

    /// `mqtts://` to a plain MQTT port: mosquitto reads the ClientHello as a malformed packet and closes, which
    /// OpenSSL reports as a failed handshake ("unexpected eof while reading"). The error says the port does not speak
    /// TLS, and does not blame a certificate.
    @Test func tlsToAPlainPortSaysThePortDoesNotSpeakTLS() async throws {
        let broker = try await Broker.start()
        defer { broker.remove() }
        var settings = configuration(broker)
        settings.tls = .systemTrustStore
        let client = try MQTTClient(configuration: settings)
        let error = await #expect(throws: MQTTError.self) { try await client.connect() }
        #expect(error?.code == .tls)
        let message = error?.message ?? ""
        #expect(
            message.hasPrefix(
                "broker 127.0.0.1:\(broker.port) does not speak TLS on this port (plain MQTT, probably): it closed the "
                    + "connection"), "\(String(describing: error))")
        #expect(!message.contains("certificate"))
        await client.close()
    }

    /// `mqtts://` to a port where another service speaks first (an SSH server's banner): named as a port without
    /// TLS.
    @Test func tlsToAServiceThatAnswersInPlainTextSaysThePortDoesNotSpeakTLS() async throws {
        let ssh = try SilentListener(greeting: Array("SSH-2.0-OpenSSH_9.2\r\n".utf8))
        defer { ssh.close() }
        var settings = MQTTConfiguration(host: "127.0.0.1", port: ssh.port, clientID: "wrong-port")
        settings.tls = .systemTrustStore
        let client = try MQTTClient(configuration: settings)
        let error = await #expect(throws: MQTTError.self) { try await client.connect() }
        #expect(error?.code == .tls)
        // The banner may be read inside mosquitto_connect (OpenSSL's "wrong version number") or after it (its first
        // byte peeked): either way, named as no TLS.
        #expect(
            error?.message.contains(
                "does not speak TLS on this port (plain MQTT, probably): it answered the TLS handshake")
                == true, "\(String(describing: error))")
        #expect(error?.message.contains("certificate") == false)
        await client.close()
    }

    @Test func tlsRefusesACertificateForAnotherHost() async throws {
        let directory = try makeTemporaryDirectory()
        try await makeCertificates(in: directory, serverNames: "DNS:broker.example")
        let broker = try await Broker.start(
            directory: directory,
            listener: """
                allow_anonymous true
                cafile \(directory)/ca.crt
                certfile \(directory)/server.crt
                keyfile \(directory)/server.key
                """)
        defer { broker.remove() }
        var settings = configuration(broker)
        settings.tls = .init(caFile: directory + "/ca.crt")
        let client = try MQTTClient(configuration: settings)
        let error = await #expect(throws: MQTTError.self) { try await client.connect() }
        #expect(error?.code == .tls)
        await client.close()
    }

    private func makeCertificates(in directory: String, serverNames: String = "IP:127.0.0.1,DNS:localhost") async throws
    {
        try await TestCertificates.make(in: directory, serverNames: serverNames)
    }
}
