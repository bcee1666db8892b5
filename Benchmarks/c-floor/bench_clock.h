/* The wall and CPU clocks both C benchmark clients read, in microseconds. */
#ifndef BENCH_CLOCK_H
#define BENCH_CLOCK_H

#include <sys/resource.h>
#include <time.h>

static inline double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* This process's user + system CPU. */
static inline double cpu_us(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6 + usage.ru_utime.tv_usec + usage.ru_stime.tv_usec;
}

/* The same, user and system apart. */
static inline void cpu_split_us(double *user, double *system) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    *user = usage.ru_utime.tv_sec * 1e6 + usage.ru_utime.tv_usec;
    *system = usage.ru_stime.tv_sec * 1e6 + usage.ru_stime.tv_usec;
}

#endif
