import Basics
import CMosquitto

// The errors `ClientCore` reports, each naming the broker (`host:port`), the user or client id and the topic
// involved, with the libmosquitto call and its own text. Never the password. On the thread only.

extension ClientCore {
    func notConnected(_ what: String) -> MQTTError {
        MQTTError(code: .disconnected, message: "not connected to broker \(configuration.broker): \(what)")
    }

    var who: String {
        if let user = configuration.credentials?.user { return "user \"\(user)\"" }
        return "client \"\(configuration.clientID)\""
    }

    /// The CONNACK refusal `code` (an MQTT 5 reason code, or a 3.1.1 return code) as an error; notes an
    /// "unsupported protocol version" for the fall back to 3.1.1.
    func refusal(_ code: Int32) -> MQTTError {
        let isV5 = protocolVersion == .v5
        let text = isV5 ? libmosquitto_reason_string(code) : libmosquitto_connack_string(code)
        if isV5, code == Int32(MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION.rawValue) || code == 1 {
            fallBackToV311 = true
        }
        let authorization: Set<Int32> =
            isV5
            ? [Int32(MQTT_RC_BAD_USERNAME_OR_PASSWORD.rawValue), Int32(MQTT_RC_NOT_AUTHORIZED.rawValue)]
            : [Int32(CONNACK_REFUSED_BAD_USERNAME_PASSWORD.rawValue), Int32(CONNACK_REFUSED_NOT_AUTHORIZED.rawValue)]
        if authorization.contains(code) {
            return MQTTError(
                code: .notAuthorized, call: "CONNACK", libraryText: text,
                message: "broker \(configuration.broker) refused \(who)")
        }
        return MQTTError(
            code: .connectionRefused, call: "CONNACK", libraryText: text,
            message: "broker \(configuration.broker) refused the connection of \(who)")
    }

    /// The failed attempt's error for libmosquitto's `status`. With TLS, a broker that answered the ClientHello in
    /// anything but TLS is named as a port without TLS, whatever OpenSSL made of it (an unexpected end of file, a
    /// wrong version number), rather than blamed on its certificate.
    func connectError(_ status: MosquittoStatus, call: String) -> MQTTError {
        if let reason = notTLSReason {
            return MQTTError(
                code: .tls, call: call, libraryText: firstLoggedError ?? status.text,
                message:
                    """
                    broker \(configuration.broker) does not speak TLS on this port (plain MQTT, probably): \
                    \(reason); use mqtt://, or the broker's TLS port (often 8883)
                    """
            )
        }
        switch status.rawValue {
        case Int32(MOSQ_ERR_TLS.rawValue), Int32(MOSQ_ERR_TLS_HANDSHAKE.rawValue):
            return MQTTError(
                code: .tls, call: call, libraryText: firstLoggedError ?? status.text,
                message:
                    """
                        the TLS handshake with broker \(configuration.broker) failed (certificate not trusted, or not \
                        for host \"\(configuration.host)\")
                        """
            )
        case Int32(MOSQ_ERR_CONN_LOST.rawValue):
            return MQTTError(
                code: .connectionRefused, call: call, libraryText: status.text,
                message: "broker \(configuration.broker) closed the connection of \(who) before CONNACK")
        case Int32(MOSQ_ERR_KEEPALIVE.rawValue):
            return MQTTError(
                code: .timeout, call: "mosquitto_loop_misc", libraryText: status.text,
                message: "broker \(configuration.broker) did not answer CONNECT within the keep-alive")
        default:
            return MQTTError(
                code: .connectionRefused, call: call, libraryText: status.text,
                message: "cannot connect to broker \(configuration.broker)")
        }
    }

    /// What the broker did in answer to the TLS ClientHello that no TLS server does, or nil (it answered in TLS,
    /// or this is no TLS connection): a handshake that then fails is the port's fault, not the certificate's.
    ///
    /// Seen on the socket (``ClientCore/TLSAnswer``) when the answer came after `mosquitto_connect` returned; an
    /// answer already there when it began the handshake is read inside that call, and only OpenSSL's reason
    /// tells then: "wrong version number" or "packet length too long" (bytes that are no TLS record), "unexpected
    /// eof while reading" (closed without a word).
    private var notTLSReason: String? {
        let closed = "it closed the connection on the TLS handshake without answering it"
        let plainText = "it answered the TLS handshake with something that is not TLS"
        switch tlsAnswer {
        case .closed: return closed
        case .notTLS(let byte):
            return "it answered the TLS handshake with a byte (0x\(Hex.string([byte]))) that starts no TLS record"
        case .tls: return nil
        case .none:
            guard configuration.tls != nil, let reason = firstLoggedError else { return nil }
            if reason.contains("wrong version number") || reason.contains("packet length too long") { return plainText }
            if reason.contains("unexpected eof while reading") { return closed }
            return nil
        }
    }

    /// No CONNACK within ``MQTTConfiguration/connectTimeout`` of the TCP connection: names what the broker left
    /// unanswered (with TLS and not a byte back, the handshake; else CONNECT) and the bound.
    func connectTimeoutError() -> MQTTError {
        let unanswered = configuration.tls != nil && tlsAnswer == .none ? "the TLS handshake" : "CONNECT"
        return MQTTError(
            code: .timeout,
            message:
                """
                broker \(configuration.broker) accepted the connection but did not answer \(unanswered) within \
                \(configuration.connectTimeoutText)
                """
        )
    }

    func publishError(_ status: MosquittoStatus, topic: String) -> MQTTError {
        let code: MQTTError.Code =
            switch status.rawValue {
            // A write that failed on the socket (ERRNO), a broken protocol state or no memory for the packet: not
            // the message's fault, so reported as a lost connection (the caller keeps it and sends it again), never as
            // a refusal for good (the bridge would skip the record).
            case Int32(MOSQ_ERR_NO_CONN.rawValue), Int32(MOSQ_ERR_CONN_LOST.rawValue), Int32(MOSQ_ERR_ERRNO.rawValue),
                Int32(MOSQ_ERR_PROTOCOL.rawValue), Int32(MOSQ_ERR_NOMEM.rawValue):
                .disconnected
            case Int32(MOSQ_ERR_QOS_NOT_SUPPORTED.rawValue), Int32(MOSQ_ERR_RETAIN_NOT_SUPPORTED.rawValue):
                .publishRefused
            default: .invalidArgument
            }
        return MQTTError(
            code: code, call: "mosquitto_publish_v5", libraryText: status.text,
            message: "cannot publish to \"\(topic)\" on broker \(configuration.broker)")
    }

    func publishOutcome(reasonCode: Int32, topic: String?) -> Result<Void, MQTTError> {
        guard reasonCode >= 0x80 else { return .success(()) }
        return .failure(
            MQTTError(
                code: .publishRefused, call: "PUBACK", libraryText: libmosquitto_reason_string(reasonCode),
                message: "broker \(configuration.broker) refused a publish" + (topic.map { " to \"\($0)\"" } ?? "")))
    }
}
