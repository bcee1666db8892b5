// Linux interfaces Swift's Glibc module does not bring in, under a `clinux_` prefix.
#ifndef CLINUX_SHIM_H
#define CLINUX_SHIM_H

#include <malloc.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <time.h>

// <sys/timerfd.h> is not part of Glibc's module map, so timerfd_create/timerfd_settime and their flags are
// invisible to Swift: re-exported here for TimerFDClock (one wakeup per deadline, unlike Task.sleep).
static inline int clinux_timerfd_create_boottime(void) {
    return timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC);
}

// Arms (absolute, on CLOCK_BOOTTIME) for seconds + nanoseconds, or disarms when both are 0.
static inline int clinux_timerfd_set_absolute(int fd, long long seconds, long nanoseconds) {
    struct itimerspec value = {0};
    value.it_value.tv_sec = seconds;
    value.it_value.tv_nsec = nanoseconds;
    return timerfd_settime(fd, TFD_TIMER_ABSTIME, &value, 0);
}

// pthread_setname_np needs _GNU_SOURCE, which the Glibc module is not built with; prctl names the calling
// thread the same way (at most 15 bytes), for top -H and /proc/PID/task/*/comm.
static inline void clinux_set_thread_name(const char *name) {
    prctl(PR_SET_NAME, name, 0, 0, 0);
}

// M_ARENA_MAX is a macro Swift does not import. glibc gives each thread that allocates while another holds an
// arena a new one (up to 8 per core), and each keeps its own free pages: a daemon whose work hops between
// libdispatch worker threads grows by fragmentation for an hour. Two arenas are plenty for its allocation rate.
static inline int clinux_limit_malloc_arenas(int count) {
    return mallopt(M_ARENA_MAX, count);
}

#endif
