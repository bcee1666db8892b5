// libmosquitto 2.0 (<mosquitto.h>, <mqtt_protocol.h>) for Swift: its types, enums and plain integer macros (such
// as MQTT_PROTOCOL_V5) import as they are; the few things the importer cannot see, and the function types the
// MQTT module loads with dlsym, are re-exported under a `cmosquitto_` prefix.
#ifndef CMOSQUITTO_SHIM_H
#define CMOSQUITTO_SHIM_H

#include <mosquitto.h>
#include <mqtt_protocol.h>

// The SSL_VERIFY_PEER value mosquitto_tls_opts_set takes for `cert_reqs`: <openssl/ssl.h> defines it, but the
// Debian package of libmosquitto-dev does not depend on libssl-dev, so the header may be absent. The value is
// fixed by OpenSSL's ABI.
static const int cmosquitto_ssl_verify_peer = 1;

// The types of the functions the MQTT module finds with dlsym (Sources/MQTT/LibMosquitto.swift): libmosquitto is
// loaded when the first client is made, not linked, so a daemon without an `mqtt:` section never maps it or the
// OpenSSL it depends on (1.7 MiB resident). `__typeof__` takes each type from the declaration above, so a
// signature cannot drift from the header; naming a function here does not reference its symbol.
#define CMOSQUITTO_FUNCTION_TYPE(name) typedef __typeof__(&mosquitto_##name) cmosquitto_##name##_t
CMOSQUITTO_FUNCTION_TYPE(strerror);
CMOSQUITTO_FUNCTION_TYPE(connack_string);
CMOSQUITTO_FUNCTION_TYPE(reason_string);
CMOSQUITTO_FUNCTION_TYPE(lib_init);
CMOSQUITTO_FUNCTION_TYPE(new);
CMOSQUITTO_FUNCTION_TYPE(destroy);
CMOSQUITTO_FUNCTION_TYPE(int_option);
CMOSQUITTO_FUNCTION_TYPE(max_inflight_messages_set);
CMOSQUITTO_FUNCTION_TYPE(will_set_v5);
CMOSQUITTO_FUNCTION_TYPE(username_pw_set);
CMOSQUITTO_FUNCTION_TYPE(tls_set);
CMOSQUITTO_FUNCTION_TYPE(tls_opts_set);
CMOSQUITTO_FUNCTION_TYPE(tls_insecure_set);
CMOSQUITTO_FUNCTION_TYPE(connect_bind_v5);
CMOSQUITTO_FUNCTION_TYPE(disconnect_v5);
CMOSQUITTO_FUNCTION_TYPE(publish_v5);
CMOSQUITTO_FUNCTION_TYPE(subscribe_v5);
CMOSQUITTO_FUNCTION_TYPE(socket);
CMOSQUITTO_FUNCTION_TYPE(want_write);
CMOSQUITTO_FUNCTION_TYPE(loop_read);
CMOSQUITTO_FUNCTION_TYPE(loop_write);
CMOSQUITTO_FUNCTION_TYPE(loop_misc);
CMOSQUITTO_FUNCTION_TYPE(connect_v5_callback_set);
CMOSQUITTO_FUNCTION_TYPE(disconnect_v5_callback_set);
CMOSQUITTO_FUNCTION_TYPE(publish_v5_callback_set);
CMOSQUITTO_FUNCTION_TYPE(subscribe_v5_callback_set);
CMOSQUITTO_FUNCTION_TYPE(message_v5_callback_set);
CMOSQUITTO_FUNCTION_TYPE(log_callback_set);
CMOSQUITTO_FUNCTION_TYPE(property_free_all);
CMOSQUITTO_FUNCTION_TYPE(property_add_int32);
CMOSQUITTO_FUNCTION_TYPE(property_add_string);
CMOSQUITTO_FUNCTION_TYPE(property_add_string_pair);
CMOSQUITTO_FUNCTION_TYPE(property_identifier);
CMOSQUITTO_FUNCTION_TYPE(property_read_int32);
CMOSQUITTO_FUNCTION_TYPE(property_read_string);
CMOSQUITTO_FUNCTION_TYPE(property_read_string_pair);
CMOSQUITTO_FUNCTION_TYPE(property_next);
#undef CMOSQUITTO_FUNCTION_TYPE

#endif
