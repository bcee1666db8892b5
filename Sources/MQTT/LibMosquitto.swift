import CMosquitto

#if canImport(Glibc)
import Glibc
#endif

// Every raw libmosquitto call made by this module lives in this file, the way swift-system keeps its syscalls in
// `Internals/Syscalls.swift` and `DBus` keeps libdbus's in `LibDBus.swift`: one place to audit what crosses into
// C, with the C name in each wrapper's name. The rest of the module goes through these wrappers and the owner
// classes (`MosquittoHandle`, `PropertyList`), never through `mosquitto_*` directly.
//
// libmosquitto is used *without* its own network loop (`mosquitto_loop_forever`/`loop_start` wake every second):
// `ClientCore` drives `mosquitto_loop_read/write/misc` from its own epoll thread, so the library's callbacks all
// run on that thread, inside one of these calls.

/// `struct mosquitto *`
typealias RawMosquitto = OpaquePointer

/// The outcome of a libmosquitto call that returns `MOSQ_ERR_*`.
struct MosquittoStatus: Equatable {
    var rawValue: Int32
    /// The `errno` right after the call, for `MOSQ_ERR_ERRNO`.
    var errno: Int32 = 0

    var isSuccess: Bool { rawValue == Int32(MOSQ_ERR_SUCCESS.rawValue) }

    static func of(_ rawValue: Int32) -> MosquittoStatus {
        MosquittoStatus(rawValue: rawValue, errno: Glibc.errno)
    }

    /// `mosquitto_strerror`, with `strerror(errno)` for MOSQ_ERR_ERRNO (whose own text just says "see errno").
    var text: String {
        if rawValue == Int32(MOSQ_ERR_ERRNO.rawValue), errno != 0 { return String(cString: strerror(errno)) }
        return libmosquitto_strerror(rawValue)
    }
}

// MARK: - Library

/// libmosquitto's functions, found with `dlsym` in `libmosquitto.so.1`. The library is loaded when the first
/// client is made, not linked: a daemon without an `mqtt:` section never maps it, nor the OpenSSL it depends on
/// (1.7 MiB resident, Benchmarks/NOTES.md). Each function's type comes from its declaration in <mosquitto.h>
/// (`cmosquitto_*_t` in the shim), so a call here is checked against the header as a direct call would be.
struct LibMosquitto: @unchecked Sendable {
    // @unchecked Sendable: immutable C function pointers into a library that is never unloaded.
    /// The soname of libmosquitto 2.0 (Debian: libmosquitto1).
    static let soname = "libmosquitto.so.1"

    /// The process's copy, loaded and initialised (`mosquitto_lib_init`) on first use: Swift runs a global's
    /// initialiser exactly once, thread-safely. A failure is kept, and every client made after it fails the same way.
    static let shared: Result<LibMosquitto, MQTTError> = load(soname)

    /// The loaded library, for code that runs only once a client exists (a `MosquittoHandle` is made only from a
    /// loaded library, and statuses, property lists and callbacks only come from a handle).
    static var loaded: LibMosquitto {
        guard case .success(let library) = shared else {
            preconditionFailure("libmosquitto is used before a client loaded it")
        }
        return library
    }

    let strerror: cmosquitto_strerror_t
    let connackString: cmosquitto_connack_string_t
    let reasonString: cmosquitto_reason_string_t
    let libInit: cmosquitto_lib_init_t
    let new: cmosquitto_new_t
    let destroy: cmosquitto_destroy_t
    let intOption: cmosquitto_int_option_t
    let maxInflightMessagesSet: cmosquitto_max_inflight_messages_set_t
    let willSetV5: cmosquitto_will_set_v5_t
    let usernamePwSet: cmosquitto_username_pw_set_t
    let tlsSet: cmosquitto_tls_set_t
    let tlsOptsSet: cmosquitto_tls_opts_set_t
    let tlsInsecureSet: cmosquitto_tls_insecure_set_t
    let connectBindV5: cmosquitto_connect_bind_v5_t
    let disconnectV5: cmosquitto_disconnect_v5_t
    let publishV5: cmosquitto_publish_v5_t
    let subscribeV5: cmosquitto_subscribe_v5_t
    let socket: cmosquitto_socket_t
    let wantWrite: cmosquitto_want_write_t
    let loopRead: cmosquitto_loop_read_t
    let loopWrite: cmosquitto_loop_write_t
    let loopMisc: cmosquitto_loop_misc_t
    let connectV5CallbackSet: cmosquitto_connect_v5_callback_set_t
    let disconnectV5CallbackSet: cmosquitto_disconnect_v5_callback_set_t
    let publishV5CallbackSet: cmosquitto_publish_v5_callback_set_t
    let subscribeV5CallbackSet: cmosquitto_subscribe_v5_callback_set_t
    let messageV5CallbackSet: cmosquitto_message_v5_callback_set_t
    let logCallbackSet: cmosquitto_log_callback_set_t
    let propertyFreeAll: cmosquitto_property_free_all_t
    let propertyAddInt32: cmosquitto_property_add_int32_t
    let propertyAddString: cmosquitto_property_add_string_t
    let propertyAddStringPair: cmosquitto_property_add_string_pair_t
    let propertyIdentifier: cmosquitto_property_identifier_t
    let propertyReadInt32: cmosquitto_property_read_int32_t
    let propertyReadString: cmosquitto_property_read_string_t
    let propertyReadStringPair: cmosquitto_property_read_string_pair_t
    let propertyNext: cmosquitto_property_next_t

    /// `dlopen(path)`, every function looked up, then `mosquitto_lib_init`. The library stays loaded for the
    /// life of the process (no `dlclose`: its OpenSSL state is process-wide).
    static func load(_ path: String) -> Result<LibMosquitto, MQTTError> {
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            return .failure(MQTTError(
                code: .libraryUnavailable, call: "dlopen", libraryText: dlerror().map { String(cString: $0) },
                message: "cannot load \(path), the MQTT client library (Debian: apt install libmosquitto1)"))
        }
        do {
            let library = try LibMosquitto(handle, path: path)
            let status = MosquittoStatus(rawValue: library.libInit())
            guard status.isSuccess else {
                return .failure(MQTTError(
                    code: .libraryUnavailable, call: "mosquitto_lib_init",
                    libraryText: text(library.strerror(status.rawValue)),
                    message: "\(path) did not initialise"))
            }
            return .success(library)
        } catch {
            dlclose(handle)
            return .failure(error)
        }
    }

    private init(_ handle: UnsafeMutableRawPointer, path: String) throws(MQTTError) {
        func symbol<Function>(_ name: String) throws(MQTTError) -> Function {
            guard let address = dlsym(handle, name) else {
                throw MQTTError(
                    code: .libraryUnavailable, call: "dlsym", libraryText: dlerror().map { String(cString: $0) },
                    message: "\(path) has no \(name) (libmosquitto 2.0 or later is needed)")
            }
            return unsafeBitCast(address, to: Function.self)
        }
        strerror = try symbol("mosquitto_strerror")
        connackString = try symbol("mosquitto_connack_string")
        reasonString = try symbol("mosquitto_reason_string")
        libInit = try symbol("mosquitto_lib_init")
        new = try symbol("mosquitto_new")
        destroy = try symbol("mosquitto_destroy")
        intOption = try symbol("mosquitto_int_option")
        maxInflightMessagesSet = try symbol("mosquitto_max_inflight_messages_set")
        willSetV5 = try symbol("mosquitto_will_set_v5")
        usernamePwSet = try symbol("mosquitto_username_pw_set")
        tlsSet = try symbol("mosquitto_tls_set")
        tlsOptsSet = try symbol("mosquitto_tls_opts_set")
        tlsInsecureSet = try symbol("mosquitto_tls_insecure_set")
        connectBindV5 = try symbol("mosquitto_connect_bind_v5")
        disconnectV5 = try symbol("mosquitto_disconnect_v5")
        publishV5 = try symbol("mosquitto_publish_v5")
        subscribeV5 = try symbol("mosquitto_subscribe_v5")
        socket = try symbol("mosquitto_socket")
        wantWrite = try symbol("mosquitto_want_write")
        loopRead = try symbol("mosquitto_loop_read")
        loopWrite = try symbol("mosquitto_loop_write")
        loopMisc = try symbol("mosquitto_loop_misc")
        connectV5CallbackSet = try symbol("mosquitto_connect_v5_callback_set")
        disconnectV5CallbackSet = try symbol("mosquitto_disconnect_v5_callback_set")
        publishV5CallbackSet = try symbol("mosquitto_publish_v5_callback_set")
        subscribeV5CallbackSet = try symbol("mosquitto_subscribe_v5_callback_set")
        messageV5CallbackSet = try symbol("mosquitto_message_v5_callback_set")
        logCallbackSet = try symbol("mosquitto_log_callback_set")
        propertyFreeAll = try symbol("mosquitto_property_free_all")
        propertyAddInt32 = try symbol("mosquitto_property_add_int32")
        propertyAddString = try symbol("mosquitto_property_add_string")
        propertyAddStringPair = try symbol("mosquitto_property_add_string_pair")
        propertyIdentifier = try symbol("mosquitto_property_identifier")
        propertyReadInt32 = try symbol("mosquitto_property_read_int32")
        propertyReadString = try symbol("mosquitto_property_read_string")
        propertyReadStringPair = try symbol("mosquitto_property_read_string_pair")
        propertyNext = try symbol("mosquitto_property_next")
    }
}

/// A C string libmosquitto returns (its texts are static and never NULL in 2.0; an empty string if one were).
private func text(_ string: UnsafePointer<CChar>?) -> String {
    string.map { String(cString: $0) } ?? ""
}

/// `mosquitto_strerror`
func libmosquitto_strerror(_ code: Int32) -> String {
    text(LibMosquitto.loaded.strerror(code))
}

/// `mosquitto_connack_string` (MQTT 3.1.1 CONNACK return codes 0–5)
func libmosquitto_connack_string(_ code: Int32) -> String {
    text(LibMosquitto.loaded.connackString(code))
}

/// `mosquitto_reason_string` (MQTT 5 reason codes)
func libmosquitto_reason_string(_ code: Int32) -> String {
    text(LibMosquitto.loaded.reasonString(code))
}

// MARK: - The client object

/// Owns one `struct mosquitto`, destroyed in `deinit` (after which no callback can run: they only run inside
/// calls made with this pointer).
final class MosquittoHandle: @unchecked Sendable {
    // @unchecked Sendable: created on the caller's thread in `MQTTClient.init`, then used only on the client's
    // thread (`ClientCore`), and destroyed once the last holder lets go; never used by two threads at once.
    let pointer: RawMosquitto
    /// The library the pointer came from.
    let api: LibMosquitto

    /// `mosquitto_new(id, clean_session, obj)`, libmosquitto loaded first (`LibMosquitto.shared`; throws
    /// `libraryUnavailable` when it cannot be); nil when out of memory or the arguments are invalid.
    init?(clientID: String, cleanSession: Bool, userData: UnsafeMutableRawPointer) throws(MQTTError) {
        let api = try LibMosquitto.shared.get()
        guard let pointer = clientID.withCString({ api.new($0, cleanSession, userData) }) else { return nil }
        self.pointer = pointer
        self.api = api
    }

    deinit {
        api.destroy(pointer)
    }

    /// `mosquitto_int_option(MOSQ_OPT_PROTOCOL_VERSION, …)`
    func setProtocolVersion(_ version: Int32) -> MosquittoStatus {
        .of(api.intOption(pointer, MOSQ_OPT_PROTOCOL_VERSION, version))
    }

    /// `mosquitto_int_option(MOSQ_OPT_TCP_NODELAY, 1)`: a publish goes out now, not after Nagle's delay.
    func setTCPNoDelay() -> MosquittoStatus {
        .of(api.intOption(pointer, MOSQ_OPT_TCP_NODELAY, 1))
    }

    /// `mosquitto_int_option(MOSQ_OPT_SEND_MAXIMUM)` (MQTT 5; the broker's receive maximum wins when lower) and
    /// `mosquitto_max_inflight_messages_set` (MQTT 3.1.1): QoS 1/2 messages in flight at once; more wait in
    /// libmosquitto's queue.
    func setMaximumInflight(_ count: Int32) -> MosquittoStatus {
        let status = MosquittoStatus.of(api.intOption(pointer, MOSQ_OPT_SEND_MAXIMUM, count))
        guard status.isSuccess else { return status }
        return .of(api.maxInflightMessagesSet(pointer, UInt32(count)))
    }

    /// `mosquitto_will_set_v5` (no properties: a will is then valid under both protocol versions)
    func setWill(topic: String, payload: [UInt8], qos: Int32, retain: Bool) -> MosquittoStatus {
        payload.withUnsafeBytes { bytes in
            topic.withCString { topic in
                .of(api.willSetV5(pointer, topic, Int32(bytes.count), bytes.baseAddress, qos, retain, nil))
            }
        }
    }

    /// `mosquitto_username_pw_set`
    func setCredentials(user: String, password: String?) -> MosquittoStatus {
        user.withCString { user in
            guard let password else { return .of(api.usernamePwSet(pointer, user, nil)) }
            return password.withCString { .of(api.usernamePwSet(pointer, user, $0)) }
        }
    }

    /// `mosquitto_tls_set(cafile, capath, certfile, keyfile, NULL)`
    func setTLS(caFile: String?, caPath: String?, certificateFile: String?, keyFile: String?) -> MosquittoStatus {
        withOptionalCString(caFile) { caFile in
            withOptionalCString(caPath) { caPath in
                withOptionalCString(certificateFile) { certificateFile in
                    withOptionalCString(keyFile) { keyFile in
                        .of(api.tlsSet(pointer, caFile, caPath, certificateFile, keyFile, nil))
                    }
                }
            }
        }
    }

    /// `mosquitto_tls_opts_set(SSL_VERIFY_PEER, NULL, NULL)`: the broker's certificate must verify.
    func requirePeerVerification() -> MosquittoStatus {
        .of(api.tlsOptsSet(pointer, cmosquitto_ssl_verify_peer, nil, nil))
    }

    /// `mosquitto_tls_insecure_set`: false keeps the host name check (the default, set explicitly).
    func setTLSInsecure(_ insecure: Bool) -> MosquittoStatus {
        .of(api.tlsInsecureSet(pointer, insecure))
    }

    /// `mosquitto_connect_bind_v5`: resolves and connects the TCP socket *blocking*, then switches it to
    /// non-blocking, starts TLS (non-blocking, finished by `loop_read`) and queues CONNECT.
    func connect(host: String, port: Int32, keepAlive: Int32, properties: PropertyList?) -> MosquittoStatus {
        host.withCString { host in
            .of(api.connectBindV5(pointer, host, port, keepAlive, nil, properties?.head))
        }
    }

    /// `mosquitto_disconnect_v5(MQTT_RC_NORMAL_DISCONNECTION)`: a normal DISCONNECT, after which the broker
    /// discards the will.
    func disconnect() -> MosquittoStatus {
        .of(api.disconnectV5(pointer, Int32(MQTT_RC_NORMAL_DISCONNECTION.rawValue), nil))
    }

    /// `mosquitto_publish_v5`; the message id on success.
    func publish(topic: String, payload: [UInt8], qos: Int32, retain: Bool, properties: PropertyList?)
        -> (MosquittoStatus, Int32)
    {
        var mid: Int32 = 0
        let status = payload.withUnsafeBytes { bytes in
            topic.withCString { topic in
                MosquittoStatus.of(api.publishV5(
                    pointer, &mid, topic, Int32(bytes.count), bytes.baseAddress, qos, retain, properties?.head))
            }
        }
        return (status, mid)
    }

    /// `mosquitto_subscribe_v5` (options 0: no-local off, retain-as-published off, send retained); the message id.
    func subscribe(filter: String, qos: Int32) -> (MosquittoStatus, Int32) {
        var mid: Int32 = 0
        let status = filter.withCString { MosquittoStatus.of(api.subscribeV5(pointer, &mid, $0, qos, 0, nil)) }
        return (status, mid)
    }

    /// `mosquitto_socket`: -1 while not connected. Changes on every reconnection.
    var socket: Int32 { api.socket(pointer) }

    /// `mosquitto_want_write`: packets (or TLS data) wait to be written.
    var wantsWrite: Bool { api.wantWrite(pointer) }

    /// `mosquitto_loop_read` (max_packets is ignored by libmosquitto 2.0; it reads what is queued)
    func loopRead() -> MosquittoStatus { .of(api.loopRead(pointer, 1)) }

    /// `mosquitto_loop_write`
    func loopWrite() -> MosquittoStatus { .of(api.loopWrite(pointer, 1)) }

    /// `mosquitto_loop_misc`: the keep-alive check (PINGREQ, or closing when the PINGRESP did not come).
    func loopMisc() -> MosquittoStatus { .of(api.loopMisc(pointer)) }

    /// Installs the C callbacks, each of which finds `ClientCore` again through the user data pointer.
    func installCallbacks() {
        api.connectV5CallbackSet(pointer) { _, userData, code, flags, _ in
            ClientCore.from(userData).handleConnack(code: code, flags: flags)
        }
        api.disconnectV5CallbackSet(pointer) { _, userData, code, _ in
            ClientCore.from(userData).handleDisconnect(code: code)
        }
        api.publishV5CallbackSet(pointer) { _, userData, mid, reason, _ in
            ClientCore.from(userData).handlePublished(mid: mid, reasonCode: reason)
        }
        api.subscribeV5CallbackSet(pointer) { _, userData, mid, count, granted, _ in
            let first = count > 0 ? granted?[0] : nil
            ClientCore.from(userData).handleSuback(mid: mid, granted: first)
        }
        api.messageV5CallbackSet(pointer) { _, userData, message, properties in
            guard let message = message?.pointee else { return }
            let topic = message.topic.map { String(cString: $0) } ?? ""
            var payload: [UInt8] = []
            if let bytes = message.payload, message.payloadlen > 0 {
                payload = Array(UnsafeRawBufferPointer(start: bytes, count: Int(message.payloadlen)))
            }
            let incoming = MQTTMessage(
                topic: topic, payload: payload, qos: MQTTQoS(rawValue: UInt8(clamping: message.qos)) ?? .atMostOnce,
                retain: message.retain, properties: PropertyList.decode(properties))
            ClientCore.from(userData).handleMessage(incoming)
        }
        api.logCallbackSet(pointer) { _, userData, level, text in
            guard let text, level & (MOSQ_LOG_ERR | MOSQ_LOG_WARNING) != 0 else { return }
            ClientCore.from(userData).handleLog(String(cString: text))
        }
    }
}

// MARK: - Properties (MQTT 5)

/// Owns one `mosquitto_property` list, freed in `deinit` (`mosquitto_property_free_all`).
final class PropertyList {
    private(set) var head: OpaquePointer?

    private init() {}

    deinit {
        LibMosquitto.loaded.propertyFreeAll(&head)
    }

    /// The PUBLISH properties of `properties`; nil when there are none to send. Fails with the status of the
    /// first `mosquitto_property_add_*` call that failed (e.g. MOSQ_ERR_MALFORMED_UTF8).
    static func publish(_ properties: MQTTProperties) -> Result<PropertyList?, MQTTError> {
        guard !properties.isEmpty else { return .success(nil) }
        let api = LibMosquitto.loaded
        let list = PropertyList()
        if let expiry = properties.messageExpiryInterval {
            let status = MosquittoStatus.of(
                api.propertyAddInt32(&list.head, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), expiry))
            if let error = list.failure(status, "mosquitto_property_add_int32") { return .failure(error) }
        }
        if let contentType = properties.contentType {
            let status = contentType.withCString {
                MosquittoStatus.of(
                    api.propertyAddString(&list.head, Int32(MQTT_PROP_CONTENT_TYPE.rawValue), $0))
            }
            if let error = list.failure(status, "mosquitto_property_add_string") { return .failure(error) }
        }
        for property in properties.userProperties {
            let status = property.name.withCString { name in
                property.value.withCString { value in
                    MosquittoStatus.of(api.propertyAddStringPair(
                        &list.head, Int32(MQTT_PROP_USER_PROPERTY.rawValue), name, value))
                }
            }
            if let error = list.failure(status, "mosquitto_property_add_string_pair") { return .failure(error) }
        }
        return .success(list)
    }

    /// The CONNECT properties: the session expiry interval (how long the broker keeps the session after the
    /// connection ends).
    static func connect(sessionExpiryInterval: UInt32) -> PropertyList {
        let list = PropertyList()
        _ = LibMosquitto.loaded.propertyAddInt32(
            &list.head, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), sessionExpiryInterval)
        return list
    }

    private func failure(_ status: MosquittoStatus, _ call: String) -> MQTTError? {
        guard !status.isSuccess else { return nil }
        return MQTTError(
            code: .invalidArgument, call: call, libraryText: status.text, message: "an MQTT 5 property was rejected")
    }

    /// Reads the properties this module knows from a list libmosquitto owns (an incoming PUBLISH's).
    static func decode(_ list: OpaquePointer?) -> MQTTProperties {
        let api = LibMosquitto.loaded
        var properties = MQTTProperties()
        var current = list
        while let property = current {
            switch api.propertyIdentifier(property) {
            case Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue):
                var value: UInt32 = 0
                if api.propertyReadInt32(
                    property, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), &value, false) != nil
                {
                    properties.messageExpiryInterval = value
                }
            case Int32(MQTT_PROP_CONTENT_TYPE.rawValue):
                var value: UnsafeMutablePointer<CChar>?
                if api.propertyReadString(property, Int32(MQTT_PROP_CONTENT_TYPE.rawValue), &value, false)
                    != nil, let value
                {
                    properties.contentType = String(cString: value)
                    free(value)
                }
            case Int32(MQTT_PROP_USER_PROPERTY.rawValue):
                var name: UnsafeMutablePointer<CChar>?
                var value: UnsafeMutablePointer<CChar>?
                if api.propertyReadStringPair(
                    property, Int32(MQTT_PROP_USER_PROPERTY.rawValue), &name, &value, false) != nil
                {
                    properties.userProperties.append(MQTTUserProperty(
                        name: name.map { String(cString: $0) } ?? "", value: value.map { String(cString: $0) } ?? ""))
                }
                free(name)
                free(value)
            default:
                break
            }
            current = api.propertyNext(property)
        }
        return properties
    }
}

/// Calls `body` with a C string for an optional Swift string (nil stays NULL).
private func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}
