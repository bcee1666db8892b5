// Linux interfaces Swift's Glibc module does not bring in, under a `clinux_` prefix.
#ifndef CLINUX_SHIM_H
#define CLINUX_SHIM_H

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>

// <sys/timerfd.h> is not part of Glibc's module map, so timerfd_create/timerfd_settime and their flags are
// invisible to Swift: re-exported here for TimerFDClock (one wakeup per deadline, unlike Task.sleep).
static inline int clinux_timerfd_create_boottime(void) {
    return timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC);
}

// The same, non-blocking: for a timerfd read when epoll says it is ready, which another thread's re-arming may
// have made not ready again (a blocking read would then stall the thread that waits in epoll).
static inline int clinux_timerfd_create_boottime_nonblocking(void) {
    return timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK);
}

// Arms (absolute, on CLOCK_BOOTTIME) for seconds + nanoseconds, or disarms when both are 0.
static inline int clinux_timerfd_set_absolute(int fd, long long seconds, long nanoseconds) {
    struct itimerspec value = {0};
    value.it_value.tv_sec = seconds;
    value.it_value.tv_nsec = nanoseconds;
    return timerfd_settime(fd, TFD_TIMER_ABSTIME, &value, 0);
}

// A pipe whose two ends are close-on-exec from the start. pipe2 needs _GNU_SOURCE, which the Glibc module is not
// built with, and pipe() then fcntl() leaves an instant in which a process another thread spawns inherits the
// write end: a daemon that forks then holds it open, and whoever reads to end of file waits for that daemon.
static inline int clinux_pipe_cloexec(int ends[2]) {
    return (int)syscall(SYS_pipe2, ends, O_CLOEXEC);
}

// A close-on-exec duplicate of `fd` (F_DUPFD_CLOEXEC), or -1: for a descriptor another library owns and may close
// at any time, where an epoll set must hold one its owner can always remove (see MQTT's ClientThread).
static inline int clinux_dup_cloexec(int fd) {
    return fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

// Sets FD_CLOEXEC on a descriptor another library opened without it (libmosquitto's socket): a process spawned
// afterwards does not inherit it. 0, or -1 with errno.
static inline int clinux_set_cloexec(int fd) {
    int flags = fcntl(fd, F_GETFD);
    if (flags < 0) return -1;
    return fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

// pthread_setname_np needs _GNU_SOURCE, which the Glibc module is not built with; prctl names the calling
// thread the same way (at most 15 bytes), for top -H and /proc/PID/task/*/comm.
static inline void clinux_set_thread_name(const char *name) {
    prctl(PR_SET_NAME, name, 0, 0, 0);
}

// Bytes the allocator has handed out and not had back (glibc's mallinfo2 `uordblks`): what a test measures a data
// structure's memory with. Glibc's module map leaves mallinfo2 out.
static inline size_t clinux_heap_bytes_in_use(void) {
    return mallinfo2().uordblks;
}

// M_ARENA_MAX is a macro Swift does not import. glibc gives each thread that allocates while another holds an
// arena a new one (up to 8 per core), and each keeps its own free pages: a daemon whose work hops between
// libdispatch worker threads grows by fragmentation for an hour. Two arenas are plenty for its allocation rate.
static inline int clinux_limit_malloc_arenas(int count) {
    return mallopt(M_ARENA_MAX, count);
}

// <sys/epoll.h> and <sys/eventfd.h> are not in Glibc's module map either: a D-Bus connection's thread waits
// in epoll_wait on the bus socket and an eventfd that other threads write to hand it work.
static inline int clinux_epoll_create(void) {
    return epoll_create1(EPOLL_CLOEXEC);
}

// Adds, modifies (EPOLL_CTL_MOD) or removes (EPOLL_CTL_DEL) `fd` with `events` (EPOLLIN/EPOLLOUT, level-triggered);
// the event carries the descriptor back.
static inline int clinux_epoll_control(int epoll, int operation, int fd, unsigned int events) {
    struct epoll_event event = {0};
    event.events = events;
    event.data.fd = fd;
    return epoll_ctl(epoll, operation, fd, &event);
}

// Waits up to `timeout` ms (-1: forever) and copies at most `capacity` ready (descriptor, events) pairs out.
static inline int clinux_epoll_wait(int epoll, int *descriptors, unsigned int *events, int capacity, int timeout) {
    struct epoll_event ready[32];
    if (capacity > 32) capacity = 32;
    int count = epoll_wait(epoll, ready, capacity, timeout);
    for (int index = 0; index < count; index++) {
        descriptors[index] = ready[index].data.fd;
        events[index] = ready[index].events;
    }
    return count;
}

static inline int clinux_eventfd(void) {
    return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

static const int clinux_epoll_ctl_add = EPOLL_CTL_ADD;
static const int clinux_epoll_ctl_mod = EPOLL_CTL_MOD;
static const int clinux_epoll_ctl_del = EPOLL_CTL_DEL;
static const unsigned int clinux_epollin = EPOLLIN;
// Signals through a pipe (the self-pipe trick), for ProcessIO.signals: the handler only write(2)s the signal's
// number, which is async-signal-safe, and a thread of the daemon reads it. libdispatch's signal sources would do
// the same, but they start its workqueue, whose monitor then wakes the process every second for good. One pipe per
// process; only KeepAliveDaemon's ProcessIO calls these (the statics live in the module that uses them).
static int clinux_signal_pipe_ends[2] = {-1, -1};

static void clinux_signal_pipe_handler(int number) {
    int saved = errno;
    unsigned char byte = (unsigned char)number;
    ssize_t written = write(clinux_signal_pipe_ends[1], &byte, 1);
    (void)written;  // a full pipe already holds enough pending signals to act on
    errno = saved;
}

// The pipe's read end (made at the first call; both ends close-on-exec, the write end non-blocking), or -1.
static inline int clinux_signal_pipe(void) {
    if (clinux_signal_pipe_ends[0] >= 0) return clinux_signal_pipe_ends[0];
    int ends[2];
    if (clinux_pipe_cloexec(ends) != 0) return -1;
    fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK);
    clinux_signal_pipe_ends[0] = ends[0];
    clinux_signal_pipe_ends[1] = ends[1];
    return ends[0];
}

// From now on, `number` is written to the pipe instead of taking its default action. SA_RESTART: the other
// threads' system calls are resumed, not failed with EINTR. Returns 0, or -1 with errno.
static inline int clinux_signal_to_pipe(int number) {
    if (clinux_signal_pipe() < 0) return -1;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = clinux_signal_pipe_handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    return sigaction(number, &action, NULL);
}

// libdispatch's run-loop integration (what CoreFoundation's run loop calls): the main queue's eventfd, and draining
// it. The main executor of Sources/QuietExecutor waits on that descriptor too, so that `DispatchQueue.main` keeps
// working without dispatch_main(). Not in Dispatch's module; declared here so that the static binary links them
// (dlsym does not find them there: they are not exported).
extern int _dispatch_get_main_queue_handle_4CF(void);
extern void _dispatch_main_queue_callback_4CF(void *message);

static const unsigned int clinux_epollout = EPOLLOUT;
static const unsigned int clinux_epollhup = EPOLLHUP;
static const unsigned int clinux_epollerr = EPOLLERR;

#endif
