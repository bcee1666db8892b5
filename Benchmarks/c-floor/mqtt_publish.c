/* The C floor for the MQTT bridge's publish path (issue #11): libmosquitto, plain C, the least work that keeps
 * the bridge's contract, and the same program as Benchmarks/MQTTBenchmark and Benchmarks/mqtt_peer.py (read
 * their headers): the same phases (harness, warmup, spread, burst), the same record bytes, the same topics,
 * QoS 1, MQTT 5 with content type application/json, one `phase=… key=value …` line per phase.
 *
 * Each record, on the generator's thread:
 *   spool (with --spool FILE)  write(2) the line to an append-only file and fdatasync it: on disk before it
 *                              counts as written, as the bridge's default sync policy does;
 *   publish                    mosquitto_publish_v5, then wait for its PUBACK;
 *   acknowledge (with --spool) pwrite(2) an 8-byte acknowledged mark at the file's start (no sync).
 * Waiting for the PUBACK:
 *   --loop inline   the generator thread runs mosquitto_loop() itself until the PUBACK came: one thread, the
 *                   fewest wake-ups there can be (the timer's, then the PUBACK's);
 *   --loop thread   libmosquitto's own network thread (mosquitto_loop_start) sends and reads, the generator
 *                   waits on a condition variable, as paho's `wait_for_publish` does.
 * No queue, no second record in flight, no reconnect, no Home Assistant: a floor, not a bridge.
 *
 * Build: cc -O2 -o mqtt_publish mqtt_publish.c -lmosquitto -lpthread
 * Run:   mqtt_publish --port P [--devices 1000] [--tick-ms 10000] [--ticks 3] [--bursts 2]
 *                     [--spool FILE] [--loop inline|thread] [--run c-floor] */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int port = 1883, devices = 1000, tick_ms = 10000, ticks = 3, bursts = 2, threaded = 0;
static const char *spool_path = NULL, *run_name = "c-floor";
static int spool = -1;
static struct mosquitto *mosq;
static mosquitto_property *properties;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t acknowledged_cond = PTHREAD_COND_INITIALIZER;
static int acknowledged_mid = -1, connected = 0;

static int64_t clock_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t deadline) {
    struct timespec ts = {deadline / 1000000000, deadline % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static void fail(const char *what) {
    fprintf(stderr, "mqtt_publish: %s\n", what);
    exit(1);
}

static void on_connect(struct mosquitto *m, void *user, int rc, int flags, const mosquitto_property *props) {
    (void)m, (void)user, (void)flags, (void)props;
    pthread_mutex_lock(&lock);
    connected = rc == 0 ? 1 : -1;
    pthread_cond_broadcast(&acknowledged_cond);
    pthread_mutex_unlock(&lock);
}

static void on_publish(struct mosquitto *m, void *user, int mid, int reason, const mosquitto_property *props) {
    (void)m, (void)user, (void)props;
    if (reason >= 0x80) fail("the broker refused a publish");
    pthread_mutex_lock(&lock);
    acknowledged_mid = mid;
    pthread_cond_broadcast(&acknowledged_cond);
    pthread_mutex_unlock(&lock);
}

/* The bytes mqtt_peer.py's record_line builds. */
static int record_line(char *out, size_t size, int device, long sequence, int tick, const char *timestamp,
                       const char *phase, int64_t poll_end) {
    int battery = 40 + (device + tick) % 60;
    int temperature = 180 + (device * 7 + tick) % 100;
    int humidity = 300 + (device * 13 + tick) % 400;
    return snprintf(
        out, size,
        "{\"ts\":\"%s\",\"seq\":%ld,\"device\":\"d%d\",\"address\":\"C0:FF:EE:00:%02x:%02x\",\"adapter\":\"hci0\","
        "\"tick\":%d,\"result\":\"newData\",\"trigger\":\"schedule\",\"values\":{\"2a19\":\"%02x\",\"2a6e\":\"%02x%02x\","
        "\"2a6f\":\"%02x%02x\"},\"notifications\":[],\"readings\":{\"battery\":{\"value\":%d,\"unit\":\"%%\"},"
        "\"temperature\":{\"value\":%d.%d,\"unit\":\"\xc2\xb0"
        "C\"},\"humidity\":{\"value\":%d.%d,\"unit\":\"%%\"}},\"error\":null,"
        "\"window\":{\"id\":%d,\"budget_ms\":20000,\"used_ms\":%d,\"outcome\":\"completed\"},\"attempts\":1,"
        "\"interval_ms\":30000,\"power\":\"normal\",\"bench\":{\"run\":\"%s\",\"phase\":\"%s\",\"poll_end_ns\":%lld}}",
        timestamp, sequence, device, device >> 8, device & 0xFF, tick, battery, temperature & 0xFF, temperature >> 8,
        humidity & 0xFF, humidity >> 8, battery, temperature / 10, temperature % 10, humidity / 10, humidity % 10,
        tick + 1, 1800 + device % 700, run_name, phase, (long long)poll_end);
}

static void timestamp_text(char *out, size_t size, int64_t realtime_ns) {
    time_t seconds = realtime_ns / 1000000000;
    struct tm tm;
    gmtime_r(&seconds, &tm);
    size_t n = strftime(out, size, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, size - n, ".%03lldZ", (long long)(realtime_ns / 1000000 % 1000));
}

static void publish(int device, const char *payload, int length) {
    char topic[64];
    snprintf(topic, sizeof topic, "keepalive/bench/d%d/state", device);
    if (spool >= 0) {
        if (write(spool, payload, length) != length || write(spool, "\n", 1) != 1) fail("spool write");
        if (fdatasync(spool) != 0) fail("fdatasync");
    }
    int mid = 0;
    pthread_mutex_lock(&lock);
    int rc = mosquitto_publish_v5(mosq, &mid, topic, length, payload, 1, false, properties);
    if (rc != MOSQ_ERR_SUCCESS) fail(mosquitto_strerror(rc));
    if (threaded) {
        while (acknowledged_mid != mid) pthread_cond_wait(&acknowledged_cond, &lock);
        pthread_mutex_unlock(&lock);
    } else {
        pthread_mutex_unlock(&lock);
        while (acknowledged_mid != mid) {
            rc = mosquitto_loop(mosq, 60000, 1);
            if (rc != MOSQ_ERR_SUCCESS) fail(mosquitto_strerror(rc));
        }
    }
    if (spool >= 0) {
        int64_t mark = lseek(spool, 0, SEEK_CUR);
        if (pwrite(spool, &mark, sizeof mark, 0) != sizeof mark) fail("spool mark");
    }
}

typedef struct {
    const char *name;
    long records;
    int64_t cpu_ns, user_us, sys_us, wall_ns, drain_ns;
    int64_t *submits, *lateness;
} Result;

static int compare(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t usage_us(const struct timeval *tv) { return (int64_t)tv->tv_sec * 1000000 + tv->tv_usec; }

static Result phase(const char *name, int count, int spread, int first_tick, long *sequence, int harness) {
    int64_t tick_ns = (int64_t)tick_ms * 1000000;
    long records = (long)devices * count;
    Result result = {name, records, 0, 0, 0, 0, 0, calloc(records, 8), calloc(records, 8)};
    static char line[2048];
    struct rusage usage_start, usage_end;
    getrusage(RUSAGE_SELF, &usage_start);
    int64_t cpu_start = clock_ns(CLOCK_PROCESS_CPUTIME_ID), wall_start = clock_ns(CLOCK_MONOTONIC);
    int64_t last_submitted = wall_start;
    long index = 0;
    for (int tick = 0; tick < count; tick++) {
        int64_t start = clock_ns(CLOCK_MONOTONIC) + 5000000;
        int64_t offset = clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC);
        char timestamp[40];
        timestamp_text(timestamp, sizeof timestamp, start + offset);
        for (int device = 1; device <= devices; device++) {
            int64_t scheduled = spread ? start + (device - 1) * tick_ns / devices : start;
            sleep_until(scheduled);
            int length = record_line(line, sizeof line, device, *sequence, first_tick + tick, timestamp, name,
                                     scheduled + offset);
            int64_t before = clock_ns(CLOCK_MONOTONIC);
            if (!harness) publish(device, line, length);
            int64_t after = clock_ns(CLOCK_MONOTONIC);
            last_submitted = after;
            result.lateness[index] = before - scheduled;
            result.submits[index++] = after - before;
            *sequence += 1;
        }
        if (spread) sleep_until(start + tick_ns);
    }
    int64_t end = clock_ns(CLOCK_MONOTONIC);
    getrusage(RUSAGE_SELF, &usage_end);
    result.cpu_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu_start;
    result.user_us = usage_us(&usage_end.ru_utime) - usage_us(&usage_start.ru_utime);
    result.sys_us = usage_us(&usage_end.ru_stime) - usage_us(&usage_start.ru_stime);
    result.wall_ns = end - wall_start;
    result.drain_ns = end - last_submitted;
    qsort(result.submits, records, 8, compare);
    qsort(result.lateness, records, 8, compare);
    return result;
}

static double percentile(const int64_t *values, long n, double fraction) {
    if (n == 0) return 0;
    long index = (long)(fraction * (n - 1) + 0.5);
    return values[index < n ? index : n - 1];
}

static void report(const Result *r, double harness_per_record) {
    double per_record = r->cpu_ns / 1000.0 / r->records;
    printf("phase=%s records=%ld cpu_us_per_record=%.2f", r->name, r->records, per_record);
    if (harness_per_record >= 0) printf(" net_cpu_us_per_record=%.2f", per_record - harness_per_record);
    printf(" user_us_per_record=%.2f sys_us_per_record=%.2f wall_ms=%.1f drain_ms=%.2f submit_p50_us=%.1f "
           "submit_p99_us=%.1f submit_max_us=%.1f late_p50_us=%.1f late_p99_us=%.1f\n",
           (double)r->user_us / r->records, (double)r->sys_us / r->records, r->wall_ns / 1e6, r->drain_ns / 1e6,
           percentile(r->submits, r->records, 0.5) / 1e3, percentile(r->submits, r->records, 0.99) / 1e3,
           r->submits[r->records - 1] / 1e3, percentile(r->lateness, r->records, 0.5) / 1e3,
           percentile(r->lateness, r->records, 0.99) / 1e3);
    fflush(stdout);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *option = argv[i];
        if (i + 1 >= argc) fail("every option needs a value");
        const char *value = argv[++i];
        if (!strcmp(option, "--port")) port = atoi(value);
        else if (!strcmp(option, "--devices")) devices = atoi(value);
        else if (!strcmp(option, "--tick-ms")) tick_ms = atoi(value);
        else if (!strcmp(option, "--ticks")) ticks = atoi(value);
        else if (!strcmp(option, "--bursts")) bursts = atoi(value);
        else if (!strcmp(option, "--spool")) spool_path = value;
        else if (!strcmp(option, "--run")) run_name = value;
        else if (!strcmp(option, "--loop")) threaded = !strcmp(value, "thread");
        else fail("unknown option");
    }
    if (devices < 1) fail("--devices must be at least 1");
    if (spool_path) {
        spool = open(spool_path, O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
        if (spool < 0) fail("cannot open the spool");
        /* The acknowledged mark's 8 bytes come first; records are appended after them. */
        int64_t zero = 0;
        if (write(spool, &zero, sizeof zero) != sizeof zero) fail("spool header");
    }
    mosquitto_lib_init();
    mosq = mosquitto_new("c-floor-bench", true, NULL);
    if (!mosq) fail("mosquitto_new");
    mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_connect_v5_callback_set(mosq, on_connect);
    mosquitto_publish_v5_callback_set(mosq, on_publish);
    if (mosquitto_property_add_string(&properties, MQTT_PROP_CONTENT_TYPE, "application/json") != MOSQ_ERR_SUCCESS)
        fail("property");
    if (mosquitto_connect(mosq, "127.0.0.1", port, 60) != MOSQ_ERR_SUCCESS) fail("no connection");
    if (threaded) {
        if (mosquitto_loop_start(mosq) != MOSQ_ERR_SUCCESS) fail("loop_start");
        pthread_mutex_lock(&lock);
        while (connected == 0) pthread_cond_wait(&acknowledged_cond, &lock);
        pthread_mutex_unlock(&lock);
    } else {
        while (connected == 0)
            if (mosquitto_loop(mosq, 1000, 1) != MOSQ_ERR_SUCCESS) fail("no connection");
    }
    if (connected < 0) fail("the broker refused the connection");

    long sequence = 0;
    Result results[5];
    int n = 0;
    results[n++] = phase("harness-spread", 1, 1, 0, &sequence, 1);
    results[n++] = phase("harness-burst", 1, 0, 0, &sequence, 1);
    sequence = 0;
    results[n++] = phase("warmup", 1, 1, 0, &sequence, 0);
    if (ticks > 0) results[n++] = phase("spread", ticks, 1, 1, &sequence, 0);
    if (bursts > 0) results[n++] = phase("burst", bursts, 0, 1 + ticks, &sequence, 0);
    double harness_spread = results[0].cpu_ns / 1000.0 / results[0].records;
    double harness_burst = results[1].cpu_ns / 1000.0 / results[1].records;
    for (int i = 0; i < n; i++) {
        double base = i < 2 ? -1 : (!strcmp(results[i].name, "burst") ? harness_burst : harness_spread);
        report(&results[i], base);
    }
    if (threaded) {
        mosquitto_disconnect(mosq);
        mosquitto_loop_stop(mosq, false);
    } else {
        mosquitto_disconnect(mosq);
    }
    mosquitto_destroy(mosq);
    mosquitto_property_free_all(&properties);
    mosquitto_lib_cleanup();
    if (spool >= 0) close(spool);
    return 0;
}
