/* The C floor for DBusBenchmark: the same Ping round trip with plain libdbus and a blocking call.
 * Build: cc -O2 -o dbus_ping dbus_ping.c $(pkg-config --cflags --libs dbus-1)
 * Run:   dbus_ping ADDRESS N   → prints "median_us=… cpu_us_per_call=… user_us_per_call=… system_us_per_call=…" */
#include <dbus/dbus.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include "bench_clock.h"

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int ping(DBusConnection *connection) {
    DBusError error;
    dbus_error_init(&error);
    DBusMessage *call = dbus_message_new_method_call("org.example.Bench", "/bench", "org.example.Bench", "Ping");
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(connection, call, DBUS_TIMEOUT_USE_DEFAULT, &error);
    dbus_message_unref(call);
    if (reply == NULL) {
        fprintf(stderr, "call failed: %s: %s\n", error.name, error.message);
        dbus_error_free(&error);
        return -1;
    }
    dbus_message_unref(reply);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDRESS N\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[2]);
    DBusError error;
    dbus_error_init(&error);
    DBusConnection *connection = dbus_connection_open_private(argv[1], &error);
    if (connection == NULL || !dbus_bus_register(connection, &error)) {
        fprintf(stderr, "connect failed: %s\n", error.message);
        return 1;
    }
    for (int i = 0; i < 1000; i++)
        if (ping(connection) != 0) return 1;
    double *latencies = malloc(sizeof(double) * n);
    double user_before, system_before;
    cpu_split_us(&user_before, &system_before);
    for (int i = 0; i < n; i++) {
        double start = now_us();
        if (ping(connection) != 0) return 1;
        latencies[i] = now_us() - start;
    }
    double user_after, system_after;
    cpu_split_us(&user_after, &system_after);
    double user = user_after - user_before, system = system_after - system_before;
    qsort(latencies, n, sizeof(double), compare);
    printf("median_us=%.1f cpu_us_per_call=%.2f user_us_per_call=%.2f system_us_per_call=%.2f\n", latencies[n / 2],
           (user + system) / n, user / n, system / n);
    free(latencies);
    dbus_connection_close(connection);
    dbus_connection_unref(connection);
    return 0;
}
