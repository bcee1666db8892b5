/* The C floor for a BlueZ poll: the same D-Bus traffic BlueZTransport produces per poll, with plain libdbus
 * on one thread, and nothing else.
 *
 * Once: Hello, AddMatch type='signal',sender='org.bluez' and the NameOwnerChanged rule for org.bluez,
 * GetNameOwner(org.bluez), GetManagedObjects on / (walked for Device1 Connected/ServicesResolved and the
 * counter characteristic's path, as the transport's object cache does).
 * Per poll: Device1.Connect; Properties.Get(Connected) only if the Connected=true signal did not come first;
 * wait for ServicesResolved=true (a signal); GattCharacteristic1.ReadValue({}); Device1.Disconnect; then the
 * Connected=false signal (so the next poll of the same device never races BlueZ's link teardown). Signals
 * from org.bluez are parsed only as far as the poll needs them.
 * At most CONCURRENCY polls are in flight (the daemon's default max_connections is 3).
 *
 * Build: cc -O2 -o bluez_poll bluez_poll.c $(pkg-config --cflags --libs dbus-1)
 * Run:   bluez_poll N ROUNDS [CONCURRENCY [PAUSE_MS]] (bus: $DBUS_SYSTEM_BUS_ADDRESS, devices C0:FF:EE:00:HH:LL
 *                                               numbered 1..N on hci0, as bluez-sim --devices makes them)
 * Prints: "first_poll_done" after the first poll (start-up measurements), then one line
 *   n=… rounds=… cpu_us_per_device=… wall_ms_per_round=… failures=… sync_ms=… sync_cpu_us=… objects=…
 * The first round is a warm-up (first connections export GATT objects) and is not measured; ROUNDS=0 stops
 * after it. sync_* is GetManagedObjects plus the walk of its reply. */
#include <dbus/dbus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include "bench_clock.h"

#define COUNTER_UUID "4b410002-6b65-6570-616c-697665000000"
#define CALL_TIMEOUT_MS 10000

typedef struct {
    int connected, resolved;
    char *characteristic; /* path of the counter characteristic, once known */
    int slot;             /* slot polling it, or -1 */
} Device;

/* GET and DISCONNECT: the call is still to be sent; GETTING, DISCONNECTING: sent, waiting for its reply. */
enum State { IDLE, CONNECTING, GET, GETTING, RESOLVING, READING, DISCONNECT, DISCONNECTING, DROPPING };

typedef struct {
    int device; /* 1-based */
    enum State state;
    int failed;
} Slot;

static DBusConnection *bus;
static Device *devices;
static int device_count, concurrency, next_device, polls_done, failures, first_printed;
static Slot *slots;

static void die(const char *what, DBusError *error) {
    fprintf(stderr, "bluez_poll: %s: %s\n", what, error && error->message ? error->message : "failed");
    exit(1);
}

/* /org/bluez/hci0/dev_C0_FF_EE_00_HH_LL[/...] → HH*256+LL when it is one of ours, else 0. */
static int device_index(const char *path, int exact) {
    static const char prefix[] = "/org/bluez/hci0/dev_C0_FF_EE_00_";
    if (strncmp(path, prefix, sizeof prefix - 1) != 0) return 0;
    const char *rest = path + sizeof prefix - 1;
    unsigned high, low;
    int used = 0;
    if (sscanf(rest, "%2x_%2x%n", &high, &low, &used) != 2 || used != 5) return 0;
    if (exact && rest[5] != '\0') return 0;
    if (!exact && rest[5] != '\0' && rest[5] != '/') return 0;
    int index = (int)(high * 256 + low);
    return index >= 1 && index <= device_count ? index : 0;
}

static void device_path(int index, char *buffer, size_t size) {
    snprintf(buffer, size, "/org/bluez/hci0/dev_C0_FF_EE_00_%02X_%02X", (index >> 8) & 0xFF, index & 0xFF);
}

/* Reads a{sv} at `dict` (an iterator on the array) for Connected / ServicesResolved / UUID. */
static void read_properties(DBusMessageIter *dict, int *connected, int *resolved, const char **uuid) {
    while (dbus_message_iter_get_arg_type(dict) == DBUS_TYPE_DICT_ENTRY) {
        DBusMessageIter entry, variant;
        const char *key;
        dbus_message_iter_recurse(dict, &entry);
        dbus_message_iter_get_basic(&entry, &key);
        dbus_message_iter_next(&entry);
        dbus_message_iter_recurse(&entry, &variant);
        int type = dbus_message_iter_get_arg_type(&variant);
        if (type == DBUS_TYPE_BOOLEAN && connected && strcmp(key, "Connected") == 0) {
            dbus_bool_t value;
            dbus_message_iter_get_basic(&variant, &value);
            *connected = value;
        } else if (type == DBUS_TYPE_BOOLEAN && resolved && strcmp(key, "ServicesResolved") == 0) {
            dbus_bool_t value;
            dbus_message_iter_get_basic(&variant, &value);
            *resolved = value;
        } else if (type == DBUS_TYPE_STRING && uuid && strcmp(key, "UUID") == 0) {
            dbus_message_iter_get_basic(&variant, uuid);
        }
        dbus_message_iter_next(dict);
    }
}

/* One object's a{sa{sv}}: Device1 flags, or the counter characteristic's path. */
static void read_interfaces(const char *path, DBusMessageIter *interfaces) {
    int index = device_index(path, 0);
    if (index == 0) return;
    Device *device = &devices[index];
    int is_device = device_index(path, 1) != 0;
    while (dbus_message_iter_get_arg_type(interfaces) == DBUS_TYPE_DICT_ENTRY) {
        DBusMessageIter entry, properties;
        const char *name;
        dbus_message_iter_recurse(interfaces, &entry);
        dbus_message_iter_get_basic(&entry, &name);
        dbus_message_iter_next(&entry);
        dbus_message_iter_recurse(&entry, &properties);
        if (is_device && strcmp(name, "org.bluez.Device1") == 0) {
            read_properties(&properties, &device->connected, &device->resolved, NULL);
        } else if (!is_device && strcmp(name, "org.bluez.GattCharacteristic1") == 0) {
            const char *uuid = NULL;
            read_properties(&properties, NULL, NULL, &uuid);
            if (uuid && strcasecmp(uuid, COUNTER_UUID) == 0 && !device->characteristic)
                device->characteristic = strdup(path);
        }
        dbus_message_iter_next(interfaces);
    }
}

static void step(int slot_index);

static void send_call(int slot_index, const char *path, const char *interface, const char *method, int kind);

static void reply_arrived(DBusPendingCall *pending, void *data) {
    int slot_index = (int)(long)data;
    Slot *slot = &slots[slot_index];
    DBusMessage *reply = dbus_pending_call_steal_reply(pending);
    dbus_pending_call_unref(pending);
    int ok = reply && dbus_message_get_type(reply) == DBUS_MESSAGE_TYPE_METHOD_RETURN;
    if (!ok && reply) {
        DBusError error;
        dbus_error_init(&error);
        dbus_set_error_from_message(&error, reply);
        fprintf(stderr, "bluez_poll: device %d (state %d): %s: %s\n", slot->device, slot->state, error.name, error.message);
        dbus_error_free(&error);
    }
    Device *device = &devices[slot->device];
    switch (slot->state) {
    case CONNECTING:
        if (!ok) { slot->failed = 1; slot->state = DISCONNECT; break; }
        slot->state = device->connected ? RESOLVING : GET;
        break;
    case GETTING:
        if (ok) {
            DBusMessageIter args, variant;
            dbus_message_iter_init(reply, &args);
            dbus_message_iter_recurse(&args, &variant);
            dbus_bool_t value = 0;
            if (dbus_message_iter_get_arg_type(&variant) == DBUS_TYPE_BOOLEAN) dbus_message_iter_get_basic(&variant, &value);
            device->connected = value;
        }
        if (!ok || !device->connected) { slot->failed = 1; slot->state = DISCONNECT; break; }
        slot->state = RESOLVING;
        break;
    case READING:
        if (!ok || strcmp(dbus_message_get_signature(reply), "ay") != 0) slot->failed = 1;
        slot->state = DISCONNECT;
        break;
    case DISCONNECTING:
        slot->state = DROPPING;
        break;
    default:
        break;
    }
    if (reply) dbus_message_unref(reply);
    step(slot_index);
}

/* `kind` says which arguments the call takes. */
static void send_call(int slot_index, const char *path, const char *interface, const char *method, int kind) {
    DBusMessage *call = dbus_message_new_method_call("org.bluez", path, interface, method);
    if (kind == READING) {
        DBusMessageIter args, dict;
        dbus_message_iter_init_append(call, &args);
        dbus_message_iter_open_container(&args, DBUS_TYPE_ARRAY, "{sv}", &dict);
        dbus_message_iter_close_container(&args, &dict);
    } else if (kind == GETTING) {
        const char *name = "org.bluez.Device1", *property = "Connected";
        dbus_message_append_args(call, DBUS_TYPE_STRING, &name, DBUS_TYPE_STRING, &property, DBUS_TYPE_INVALID);
    }
    DBusPendingCall *pending = NULL;
    if (!dbus_connection_send_with_reply(bus, call, &pending, CALL_TIMEOUT_MS) || !pending) die("send", NULL);
    dbus_message_unref(call);
    dbus_pending_call_set_notify(pending, reply_arrived, (void *)(long)slot_index, NULL);
    if (dbus_pending_call_get_completed(pending)) reply_arrived(pending, (void *)(long)slot_index);
}

static void start_next(int slot_index) {
    Slot *slot = &slots[slot_index];
    if (next_device > device_count) { slot->state = IDLE; slot->device = 0; return; }
    slot->device = next_device++;
    slot->failed = 0;
    slot->state = CONNECTING;
    devices[slot->device].slot = slot_index;
    char path[64];
    device_path(slot->device, path, sizeof path);
    send_call(slot_index, path, "org.bluez.Device1", "Connect", CONNECTING);
}

/* Advances a slot as far as it can go without waiting. */
static void step(int slot_index) {
    Slot *slot = &slots[slot_index];
    Device *device = &devices[slot->device];
    char path[64];
    device_path(slot->device, path, sizeof path);
    switch (slot->state) {
    case GET:
        slot->state = GETTING;
        send_call(slot_index, path, "org.freedesktop.DBus.Properties", "Get", GETTING);
        return;
    case RESOLVING:
        if (!device->connected) { slot->failed = 1; slot->state = DISCONNECT; step(slot_index); return; }
        if (!device->resolved || !device->characteristic) return; /* a signal moves it on */
        slot->state = READING;
        send_call(slot_index, device->characteristic, "org.bluez.GattCharacteristic1", "ReadValue", READING);
        return;
    case DISCONNECT:
        slot->state = DISCONNECTING;
        send_call(slot_index, path, "org.bluez.Device1", "Disconnect", DISCONNECTING);
        return;
    case DROPPING:
        if (device->connected) return; /* the Connected=false signal moves it on */
        device->slot = -1;
        polls_done++;
        if (slot->failed) failures++;
        if (!first_printed) {
            first_printed = 1;
            printf("first_poll_done\n");
            fflush(stdout);
        }
        start_next(slot_index);
        return;
    default:
        return;
    }
}

static DBusHandlerResult on_signal(DBusConnection *connection, DBusMessage *message, void *data) {
    (void)connection;
    (void)data;
    if (dbus_message_get_type(message) != DBUS_MESSAGE_TYPE_SIGNAL) return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    const char *member = dbus_message_get_member(message);
    DBusMessageIter args;
    int touched = 0;
    if (strcmp(member, "PropertiesChanged") == 0) {
        touched = device_index(dbus_message_get_path(message), 1);
        if (touched && dbus_message_iter_init(message, &args)) {
            const char *interface;
            dbus_message_iter_get_basic(&args, &interface);
            if (strcmp(interface, "org.bluez.Device1") == 0) {
                DBusMessageIter dict;
                dbus_message_iter_next(&args);
                dbus_message_iter_recurse(&args, &dict);
                read_properties(&dict, &devices[touched].connected, &devices[touched].resolved, NULL);
            } else {
                touched = 0;
            }
        }
    } else if (strcmp(member, "InterfacesAdded") == 0 && dbus_message_iter_init(message, &args)) {
        const char *path;
        DBusMessageIter interfaces;
        dbus_message_iter_get_basic(&args, &path);
        dbus_message_iter_next(&args);
        dbus_message_iter_recurse(&args, &interfaces);
        read_interfaces(path, &interfaces);
        touched = device_index(path, 0);
    }
    if (touched && devices[touched].slot >= 0) step(devices[touched].slot);
    return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
}

static DBusMessage *call_blocking(const char *destination, const char *path, const char *interface, const char *method,
                                  const char *argument) {
    DBusError error;
    dbus_error_init(&error);
    DBusMessage *call = dbus_message_new_method_call(destination, path, interface, method);
    if (argument) dbus_message_append_args(call, DBUS_TYPE_STRING, &argument, DBUS_TYPE_INVALID);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(bus, call, CALL_TIMEOUT_MS, &error);
    dbus_message_unref(call);
    if (!reply) die(method, &error);
    return reply;
}

static int run_round(void) {
    next_device = 1;
    polls_done = 0;
    int before = failures;
    for (int i = 0; i < concurrency; i++) start_next(i);
    double give_up = now_us() + 600e6;
    while (polls_done < device_count) {
        if (!dbus_connection_read_write_dispatch(bus, 1000)) die("bus connection lost", NULL);
        if (now_us() > give_up) {
            fprintf(stderr, "bluez_poll: round did not finish in 600 s (%d of %d polls)\n", polls_done, device_count);
            exit(1);
        }
    }
    return failures - before;
}

/* PAUSE_MS before each measured round: waits in libdbus's own loop (signals that come meanwhile are read and
 * dispatched, as a daemon's would be), so the rounds run at a daemon's cadence instead of back to back: what a
 * poll costs when its code and data have gone cold in the quiet between ticks. */
static void idle(int pause_ms) {
    double end = now_us() + pause_ms * 1e3;
    for (double left = end - now_us(); left > 0; left = end - now_us())
        dbus_connection_read_write_dispatch(bus, (int)(left / 1e3) + 1);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s N ROUNDS [CONCURRENCY [PAUSE_MS]]\n", argv[0]);
        return 2;
    }
    device_count = atoi(argv[1]);
    int rounds = atoi(argv[2]);
    concurrency = argc > 3 ? atoi(argv[3]) : 3;
    int pause_ms = argc > 4 ? atoi(argv[4]) : 0;
    if (device_count < 1 || device_count > 65535 || rounds < 0 || concurrency < 1 || pause_ms < 0) return 2;
    if (concurrency > device_count) concurrency = device_count;
    devices = calloc(device_count + 1, sizeof(Device));
    for (int i = 0; i <= device_count; i++) devices[i].slot = -1;
    slots = calloc(concurrency, sizeof(Slot));

    const char *address = getenv("DBUS_SYSTEM_BUS_ADDRESS");
    DBusError error;
    dbus_error_init(&error);
    bus = address ? dbus_connection_open_private(address, &error) : dbus_bus_get_private(DBUS_BUS_SYSTEM, &error);
    if (!bus || !dbus_bus_register(bus, &error)) die("connect", &error);
    dbus_connection_add_filter(bus, on_signal, NULL, NULL);
    dbus_bus_add_match(bus, "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                            "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='org.bluez'", &error);
    if (dbus_error_is_set(&error)) die("AddMatch", &error);
    dbus_bus_add_match(bus, "type='signal',sender='org.bluez'", &error);
    if (dbus_error_is_set(&error)) die("AddMatch", &error);
    dbus_message_unref(call_blocking("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                     "GetNameOwner", "org.bluez"));

    double sync_cpu = cpu_us(), sync_start = now_us();
    DBusMessage *tree = call_blocking("org.bluez", "/", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects", NULL);
    DBusMessageIter args, objects;
    dbus_message_iter_init(tree, &args);
    dbus_message_iter_recurse(&args, &objects);
    int object_count = 0;
    while (dbus_message_iter_get_arg_type(&objects) == DBUS_TYPE_DICT_ENTRY) {
        DBusMessageIter entry, interfaces;
        const char *path;
        dbus_message_iter_recurse(&objects, &entry);
        dbus_message_iter_get_basic(&entry, &path);
        dbus_message_iter_next(&entry);
        dbus_message_iter_recurse(&entry, &interfaces);
        read_interfaces(path, &interfaces);
        object_count++;
        dbus_message_iter_next(&objects);
    }
    dbus_message_unref(tree);
    double sync_ms = (now_us() - sync_start) / 1e3;
    sync_cpu = cpu_us() - sync_cpu;

    run_round(); /* warm-up */
    double cpu_start = cpu_us(), wall_start = now_us();
    int measured_failures = 0;
    for (int r = 0; r < rounds; r++) {
        if (pause_ms > 0) idle(pause_ms);
        measured_failures += run_round();
    }
    double wall = now_us() - wall_start, cpu = cpu_us() - cpu_start;
    int polls = device_count * (rounds > 0 ? rounds : 1);
    printf("n=%d rounds=%d cpu_us_per_device=%.1f wall_ms_per_round=%.1f failures=%d sync_ms=%.2f sync_cpu_us=%.0f objects=%d\n",
           device_count, rounds, rounds > 0 ? cpu / polls : 0.0, rounds > 0 ? wall / 1e3 / rounds : 0.0,
           measured_failures + (rounds == 0 ? failures : 0), sync_ms, sync_cpu, object_count);
    dbus_connection_close(bus);
    dbus_connection_unref(bus);
    return 0;
}
