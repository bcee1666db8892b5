// libmosquitto 2.0 (<mosquitto.h>, <mqtt_protocol.h>) for Swift, with the few things its importer cannot see
// re-exported under a `cmosquitto_` prefix. Everything else (functions, enums, the callback setters, plain
// integer macros such as MQTT_PROTOCOL_V5) imports as it is.
#ifndef CMOSQUITTO_SHIM_H
#define CMOSQUITTO_SHIM_H

#include <mosquitto.h>
#include <mqtt_protocol.h>

// The SSL_VERIFY_PEER value mosquitto_tls_opts_set takes for `cert_reqs`: <openssl/ssl.h> defines it, but the
// Debian package of libmosquitto-dev does not depend on libssl-dev, so the header may be absent. The value is
// fixed by OpenSSL's ABI.
static const int cmosquitto_ssl_verify_peer = 1;

#endif
