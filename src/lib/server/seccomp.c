/* seccomp.c - the system call half of the sandbox (see sandbox.h): a
 * libseccomp filter, loaded on every thread at once (TSYNC), that allows
 * the calls the server makes once it has started and refuses the rest.
 *
 * A refused call is trapped (SIGSYS), not fatal: the handler makes it
 * fail with EPERM, as if the kernel had said so, and writes one error log
 * line naming it (at most one a second per call). The code around every
 * system call already turns a failure into an error answer or a closed
 * connection, so a refused call costs one request, not the server (the
 * kill action would turn a rarely used path nobody listed into an outage
 * for every client), and the log line says at once what is missing,
 * where a plain EPERM would leave a mystery. Calls from another
 * architecture's ABI (int 0x80 on x86_64) kill the process: no server
 * code makes them. */
#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "base/common.h"
#include "base/err.h"
#include "base/log.h"
#include "server/sandbox.h"

/* What the server calls after start-up: found by reading the code and
 * by running the black-box suite with the sandbox on (see README). */
static const char *const allowed[] = {
    /* files: serving, the cache, temporary files, logs, reloads */
    "read",
    "write",
    "readv",
    "writev",
    "pread64",
    "pwrite64",
    "lseek",
    "close",
    "open",
    "openat",
    "openat2",
    "fstat",
    "newfstatat",
    "stat",
    "lstat",
    "statx",
    "fstatfs",
    "fcntl",
    "dup",
    "dup2",
    "dup3",
    "getdents64",
    "readlink",
    "readlinkat",
    "unlink",
    "unlinkat",
    "rmdir",
    "access",
    "faccessat",
    "faccessat2",
    "getcwd",
    "sendfile",
    "fadvise64",
    "ftruncate",
    /* memory (and dlopen at a reload) */
    "brk",
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    /* threads, time, signals, exit */
    "futex",
    "set_robust_list",
    "rseq",
    "sched_yield",
    "sched_getaffinity",
    "sched_setscheduler",
    "setpriority",
    "getpriority",
    "gettid",
    "getpid",
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "tgkill",
    "rt_sigprocmask",
    "rt_sigtimedwait", /* the control thread takes the signals (control.c) */
    "rt_sigaction",
    "rt_sigreturn",
    "sigaltstack",
    "restart_syscall",
    "exit",
    "exit_group",
    "nanosleep",
    "clock_nanosleep",
    "clock_gettime",
    "clock_getres",
    "gettimeofday",
    "time",
    "getrandom",
    "prlimit64",
    "getrlimit",
    /* waiting: epoll, poll, eventfds, inotify */
    "epoll_create1",
    "epoll_ctl",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "poll",
    "ppoll",
    "eventfd2",
    "inotify_init1",
    "inotify_add_watch",
    "inotify_rm_watch",
    /* sockets that exist: accepting, I/O, options (no socket(), bind(),
     * listen() or connect(): no new listener, no way out) */
    "accept",
    "accept4",
    "recvfrom",
    "recvmsg",
    "sendto",
    "sendmsg",
    "shutdown",
    "setsockopt",
    "getsockopt",
    "getsockname",
    "getpeername",
#ifdef SANITIZED
    /* LeakSanitizer at exit: a tracer task that stops the threads (and
     * lists them with the old getdents) */
    "getdents",
    "ptrace",
    "wait4",
    "prctl",
    "getppid",
    "clone",
#endif
};

/* --- the trap ---------------------------------------------------------------- */

#define MAX_NR 1024
static char *names[MAX_NR];              /* resolved when the filter loads */
static _Atomic int64_t last_log[MAX_NR]; /* the second each was last logged */
static long utc_offset;                  /* local time, as the error log writes it */

/* n as decimal at p; the end */
static char *put_num(char *p, unsigned long n, int width)
{
    char tmp[24];
    int k = 0;
    do
        tmp[k++] = (char)('0' + n % 10);
    while ((n /= 10));
    while (k < width)
        tmp[k++] = '0';
    while (k)
        *p++ = tmp[--k];
    return p;
}

static char *put_str(char *p, const char *s)
{
    while (*s)
        *p++ = *s++;
    return p;
}

/* "YYYY/MM/DD HH:MM:SS" for t without localtime_r (not async-signal-safe):
 * the civil date of a day count (H. Hinnant's days_from_civil, reversed). */
static char *put_time(char *p, int64_t t)
{
    int64_t days = t >= 0 ? t / 86400 : (t - 86399) / 86400, s = t - days * 86400;
    int64_t z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097, yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
    int64_t y = yoe + era * 400 + (m <= 2);
    p = put_num(p, (unsigned long)y, 4);
    *p++ = '/';
    p = put_num(p, (unsigned long)m, 2);
    *p++ = '/';
    p = put_num(p, (unsigned long)d, 2);
    *p++ = ' ';
    p = put_num(p, (unsigned long)(s / 3600), 2);
    *p++ = ':';
    p = put_num(p, (unsigned long)(s / 60 % 60), 2);
    *p++ = ':';
    return put_num(p, (unsigned long)(s % 60), 2);
}

static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    int saved = errno;
    ucontext_t *uc = ctx;
#if defined(__x86_64__)
    uc->uc_mcontext.gregs[REG_RAX] = -EPERM;
#elif defined(__aarch64__)
    uc->uc_mcontext.regs[0] = (unsigned long long)-EPERM;
#endif
    int nr = si->si_syscall;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t sec = now.tv_sec;
    if (nr >= 0 && nr < MAX_NR) {
        int64_t was = atomic_load(&last_log[nr]);
        if (was == sec || !atomic_compare_exchange_strong(&last_log[nr], &was, sec)) {
            errno = saved;
            return;
        }
    }
    char line[256], *p = put_time(line, sec + utc_offset);
    p = put_str(p, " [error] sandbox: system call ");
    if (nr >= 0 && nr < MAX_NR && names[nr])
        p = put_str(p, names[nr]);
    else
        p = put_str(p, "?");
    p = put_str(p, " (");
    p = put_num(p, (unsigned long)(nr < 0 ? 0 : nr), 1);
    p = put_str(p, ") refused: EPERM\n");
    /* write_full() only loops on write(): async-signal-safe (errno is restored) */
    (void)write_full(log_fd(), line, (size_t)(p - line));
    errno = saved;
}

/* --- loading ------------------------------------------------------------------ */

static int add(scmp_filter_ctx f, uint32_t action, const char *name, unsigned n_cmp,
               const struct scmp_arg_cmp *cmp)
{
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR)
        return 0; /* not a call of this architecture */
    return seccomp_rule_add_array(f, action, nr, n_cmp, cmp);
}

int seccomp_enter(unsigned connect_families, char *err, size_t errlen)
{
#if defined(__x86_64__) || defined(__aarch64__)
    uint32_t deny = SCMP_ACT_TRAP;
#else /* no way to set the return value from the handler */
    uint32_t deny = SCMP_ACT_ERRNO(EPERM);
#endif
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    utc_offset = tm.tm_gmtoff;
    for (int nr = 0; nr < MAX_NR; nr++)
        if (!names[nr])
            names[nr] = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);

    struct sigaction sa = {.sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSYS, &sa, NULL) < 0)
        return err_set(err, errlen, -errno, NULL, "sandbox: sigaction: %s", strerror(errno));

    scmp_filter_ctx f = seccomp_init(deny);
    if (!f)
        return err_set(err, errlen, -ENOMEM, NULL, "sandbox: seccomp_init failed");
    int r = seccomp_attr_set(f, SCMP_FLTATR_CTL_TSYNC, 1);
    if (!r) /* int 0x80 and the like */
        r = seccomp_attr_set(f, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r)
        err_set(err, errlen, r, NULL, "sandbox: seccomp attributes: %s", strerror(-r));
    for (size_t i = 0; !r && i < sizeof(allowed) / sizeof(allowed[0]); i++)
        if ((r = add(f, SCMP_ACT_ALLOW, allowed[i], 0, NULL)) < 0)
            err_set(err, errlen, r, NULL, "sandbox: seccomp rule for %s: %s", allowed[i],
                    strerror(-r));
#ifndef SANITIZED
    /* threads, not processes: clone only with CLONE_THREAD */
    struct scmp_arg_cmp thread = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD);
    if (!r && (r = add(f, SCMP_ACT_ALLOW, "clone", 1, &thread)) < 0)
        err_set(err, errlen, r, NULL, "sandbox: seccomp rule for clone: %s", strerror(-r));
#endif
    /* a gateway's upstreams: socket() for their address families only,
     * and connect() (its address is behind a pointer) */
    for (int fam = 0; !r && fam < 32; fam++) {
        if (!(connect_families & (1u << fam)))
            continue;
        struct scmp_arg_cmp family = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fam);
        if ((r = add(f, SCMP_ACT_ALLOW, "socket", 1, &family)) < 0)
            err_set(err, errlen, r, NULL, "sandbox: seccomp rule for socket: %s", strerror(-r));
    }
    if (!r && connect_families && (r = add(f, SCMP_ACT_ALLOW, "connect", 0, NULL)) < 0)
        err_set(err, errlen, r, NULL, "sandbox: seccomp rule for connect: %s", strerror(-r));
    /* clone3's flags are behind a pointer, out of a filter's reach: ENOSYS
     * makes glibc use clone */
    if (!r && (r = add(f, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL)) < 0)
        err_set(err, errlen, r, NULL, "sandbox: seccomp rule for clone3: %s", strerror(-r));
    if (!r && (r = seccomp_load(f)) < 0)
        err_set(err, errlen, r, NULL, "sandbox: loading the seccomp filter: %s", strerror(-r));
    seccomp_release(f);
    return r < 0 ? r : 0;
}
