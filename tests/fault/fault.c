/* fault.c - an LD_PRELOAD library for tests only: it makes one call site of
 * colibri's fail, or records which call sites a run reaches.
 *
 * Hooked: malloc calloc realloc aligned_alloc posix_memalign, open openat
 * (and their 64 names), syscall(SYS_openat2), mmap, read pread, writev write
 * send, sendfile, accept4. A call site is named FUNC:0xOFFSET, the offset of
 * the return address in colibri's executable (stable from run to run of one
 * build; tests/fault/run.py resolves it with addr2line). A call that libc
 * makes for colibri (strdup calling malloc) is named by the first colibri
 * frame of its backtrace; so are OpenSSL's reads and writes on a socket
 * (a TLS connection's I/O).
 *
 * Environment (read once, at load; LD_PRELOAD is then removed so that no
 * child inherits the library):
 *   FAULT_RECORD=FILE  append "FUNC:0xOFF" for every site reached the first
 *                      time (after a "# PYTEST_CURRENT_TEST" line)
 *   FAULT_SITE=FUNC:0xOFF  the site to fail
 *   FAULT_KIND=ENOMEM|EMFILE|EIO|EPIPE|ENOSPC|EINTR|ECONNRESET|short
 *                      the failure: that errno, or a short count (half the
 *                      bytes asked, at least one) for read/pread/write/writev/
 *                      send/sendfile
 *   FAULT_NTH=N        the first hit at the site to fail (1-based, default 1)
 *   FAULT_COUNT=K      how many hits to fail from there (default 0: all)
 *   FAULT_CTL=FILE     a file of at least 16 bytes shared with the test:
 *                      byte 0 '0' lifts the fault at run time; bytes 8-15
 *                      count the failures injected (native u64)
 */
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <link.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define TLS __thread __attribute__((tls_model("initial-exec")))

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

enum fn {
    F_MALLOC,
    F_CALLOC,
    F_REALLOC,
    F_ALIGNED_ALLOC,
    F_POSIX_MEMALIGN,
    F_OPEN,
    F_OPENAT,
    F_OPENAT2,
    F_MMAP,
    F_READ,
    F_PREAD,
    F_WRITEV,
    F_WRITE,
    F_SEND,
    F_SENDFILE,
    F_ACCEPT4,
    F_COUNT
};
static const char *const fn_names[F_COUNT] = {
    "malloc", "calloc", "realloc", "aligned_alloc", "posix_memalign", "open", "openat",   "openat2",
    "mmap",   "read",   "pread",   "writev",        "write",          "send", "sendfile", "accept4",
};

static uintptr_t text_lo, text_hi, exe_base; /* colibri's executable code */
static int record_fd = -1;
static int target_fn = -1;
static uintptr_t target_off;
static int fail_errno;
static bool fail_short;
static unsigned long fail_nth = 1, fail_count;
static atomic_ulong target_hits;
static volatile char *ctl; /* shared with the test, or NULL */
static TLS int in_hook;

/* the real functions behind the non-allocating hooks */
static int (*real_open)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static long (*real_syscall)(long, ...);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static ssize_t (*real_read)(int, void *, size_t);
static ssize_t (*real_pread)(int, void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_send)(int, const void *, size_t, int);
static ssize_t (*real_sendfile)(int, int, off_t *, size_t);
static int (*real_accept4)(int, struct sockaddr *, socklen_t *, int);

/* sites seen, for record mode: open addressing, keys fn << 48 | offset */
#define SEEN_SLOTS 8192
static _Atomic uint64_t seen[SEEN_SLOTS];

static int find_exe(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    /* the first object is the executable */
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (!text_lo || lo < text_lo)
            text_lo = lo;
        if (lo + ph->p_memsz > text_hi)
            text_hi = lo + ph->p_memsz;
    }
    exe_base = info->dlpi_addr;
    return 1;
}

static bool in_exe(uintptr_t a)
{
    return a >= text_lo && a < text_hi;
}

static void put(const char *s)
{
    if (record_fd >= 0)
        syscall(SYS_write, record_fd, s, strlen(s));
}

/* An eventfd's read and write cannot fail in a way that matters (a
 * saturated counter means the reader is awake): its sites are left alone. */
static bool is_eventfd(int fd)
{
    if (fd < 0)
        return false;
    char path[40], link[32];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof(link) - 1);
    return n > 0 && (link[n] = 0, strstr(link, "eventfd") != NULL);
}

/* A socket: OpenSSL's reads and writes on a TLS connection's socket
 * (its BIO calls read() and write()) are named by the colibri frame that
 * called into OpenSSL (tls_read, tls_writev, tls_accept...), so that TLS's
 * I/O fails, short and interrupted like plain I/O. Other reads and writes
 * made by libraries (files, pipes) are not colibri's sites. */
static bool lib_socket_io(uintptr_t ret, int fd)
{
    struct stat st;
    return !in_exe(ret) && fd >= 0 && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}

static bool seen_already(uint64_t key)
{
    for (unsigned i = (unsigned)((key * 0x9e3779b97f4a7c15ull) >> 51) % SEEN_SLOTS, n = 0;
         n < SEEN_SLOTS; i = (i + 1) % SEEN_SLOTS, n++) {
        uint64_t cur = atomic_load(&seen[i]);
        if (cur == key)
            return true;
        if (cur == 0)
            return false;
    }
    return true;
}

static void record(int fn, uintptr_t off, int fd)
{
    uint64_t key = (uint64_t)fn << 48 | (uint64_t)off;
    if (seen_already(key) || is_eventfd(fd))
        return;
    for (unsigned i = (unsigned)((key * 0x9e3779b97f4a7c15ull) >> 51) % SEEN_SLOTS, n = 0;
         n < SEEN_SLOTS; i = (i + 1) % SEEN_SLOTS, n++) {
        uint64_t cur = atomic_load(&seen[i]);
        if (cur == key)
            return;
        if (cur == 0) {
            uint64_t zero = 0;
            if (!atomic_compare_exchange_strong(&seen[i], &zero, key)) {
                if (zero == key)
                    return;
                continue;
            }
            char line[64];
            snprintf(line, sizeof(line), "%s:0x%lx\n", fn_names[fn], (unsigned long)off);
            put(line);
            return;
        }
    }
}

/* The offset of the colibri frame that made this call, or 0. */
static uintptr_t site_of(uintptr_t ret, bool via_libc)
{
    if (in_exe(ret))
        return ret - exe_base;
    if (!via_libc)
        return 0;
    void *frames[16]; /* deep enough for SSL_read -> ... -> BIO -> read */
    int n = backtrace(frames, 16);
    for (int i = 1; i < n; i++)
        if (in_exe((uintptr_t)frames[i]))
            return (uintptr_t)frames[i] - exe_base;
    return 0;
}

/* Whether this call fails, and how: 0 no, 1 with fail_errno, 2 short. */
static int decide(int fn, uintptr_t ret, bool via_libc, int fd)
{
    if (in_hook || (record_fd < 0 && fn != target_fn))
        return 0;
    in_hook = 1;
    int verdict = 0;
    uintptr_t off = site_of(ret, via_libc);
    if (off && record_fd >= 0)
        record(fn, off, fd);
    if (off && fn == target_fn && off == target_off && (!ctl || ctl[0] != '0') && !is_eventfd(fd)) {
        unsigned long hit = atomic_fetch_add(&target_hits, 1) + 1;
        if (hit >= fail_nth && (fail_count == 0 || hit < fail_nth + fail_count)) {
            verdict = fail_short ? 2 : 1;
            if (ctl)
                atomic_fetch_add((_Atomic uint64_t *)(ctl + 8), 1);
        }
    }
    in_hook = 0;
    return verdict;
}

#define RET ((uintptr_t)__builtin_return_address(0))

static size_t shorter(size_t n)
{
    return n > 1 ? n / 2 : n;
}

static const struct {
    const char *name;
    int e;
} errnos[] = {{"ENOMEM", ENOMEM}, {"EMFILE", EMFILE},         {"ENFILE", ENFILE},
              {"EIO", EIO},       {"EPIPE", EPIPE},           {"ENOSPC", ENOSPC},
              {"EINTR", EINTR},   {"ECONNRESET", ECONNRESET}, {"EAGAIN", EAGAIN},
              {"EACCES", EACCES}, {"ENOBUFS", ENOBUFS},       {"ECONNABORTED", ECONNABORTED}};

__attribute__((constructor)) static void fault_init(void)
{
    in_hook = 1;
    real_open = dlsym(RTLD_NEXT, "open");
    real_openat = dlsym(RTLD_NEXT, "openat");
    real_syscall = dlsym(RTLD_NEXT, "syscall");
    real_mmap = dlsym(RTLD_NEXT, "mmap");
    real_read = dlsym(RTLD_NEXT, "read");
    real_pread = dlsym(RTLD_NEXT, "pread");
    real_writev = dlsym(RTLD_NEXT, "writev");
    real_write = dlsym(RTLD_NEXT, "write");
    real_send = dlsym(RTLD_NEXT, "send");
    real_sendfile = dlsym(RTLD_NEXT, "sendfile");
    real_accept4 = dlsym(RTLD_NEXT, "accept4");
    dl_iterate_phdr(find_exe, NULL);
    void *warm[2];
    backtrace(warm, 2); /* loads libgcc_s now, not inside a hook */

    const char *rec = getenv("FAULT_RECORD");
    if (rec && *rec) {
        record_fd = (int)syscall(SYS_open, rec, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        const char *t = getenv("PYTEST_CURRENT_TEST");
        char line[1024];
        snprintf(line, sizeof(line), "# %s\n", t ? t : "?");
        put(line);
    }
    const char *site = getenv("FAULT_SITE");
    const char *colon = site ? strchr(site, ':') : NULL;
    if (colon) {
        for (int i = 0; i < F_COUNT; i++)
            if (strlen(fn_names[i]) == (size_t)(colon - site) &&
                !memcmp(site, fn_names[i], (size_t)(colon - site)))
                target_fn = i;
        target_off = (uintptr_t)strtoul(colon + 1, NULL, 0);
        const char *kind = getenv("FAULT_KIND");
        fail_errno = EIO;
        if (kind && !strcmp(kind, "short"))
            fail_short = true;
        else if (kind)
            for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
                if (!strcmp(kind, errnos[i].name))
                    fail_errno = errnos[i].e;
        const char *s = getenv("FAULT_NTH");
        if (s && strtoul(s, NULL, 10) > 0)
            fail_nth = strtoul(s, NULL, 10);
        s = getenv("FAULT_COUNT");
        if (s)
            fail_count = strtoul(s, NULL, 10);
        const char *c = getenv("FAULT_CTL");
        int fd = c ? (int)syscall(SYS_open, c, O_RDWR | O_CLOEXEC) : -1;
        if (fd >= 0) {
            void *m = real_mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (m != MAP_FAILED)
                ctl = m;
            syscall(SYS_close, fd);
        }
    }
    if (getenv("FAULT_DEBUG"))
        fprintf(stderr,
                "fault: exe %#lx-%#lx base %#lx, site %d:%#lx kind %d%s nth %lu count %lu\n",
                (unsigned long)text_lo, (unsigned long)text_hi, (unsigned long)exe_base, target_fn,
                (unsigned long)target_off, fail_errno, fail_short ? " short" : "", fail_nth,
                fail_count);
    unsetenv("LD_PRELOAD");
    in_hook = 0;
}

/* ---- allocation: failures are NULL + ENOMEM, whatever FAULT_KIND says ---- */

void *malloc(size_t n)
{
    if (decide(F_MALLOC, RET, true, -1)) {
        errno = ENOMEM;
        return NULL;
    }
    return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
    if (decide(F_CALLOC, RET, true, -1)) {
        errno = ENOMEM;
        return NULL;
    }
    return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
    if (decide(F_REALLOC, RET, true, -1)) {
        errno = ENOMEM;
        return NULL;
    }
    return __libc_realloc(p, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    if (decide(F_ALIGNED_ALLOC, RET, true, -1)) {
        errno = ENOMEM;
        return NULL;
    }
    return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    if (decide(F_POSIX_MEMALIGN, RET, true, -1))
        return ENOMEM;
    void *p = __libc_memalign(align, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

/* ---- files ---- */

int open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(ap, mode_t) : 0;
    va_end(ap);
    if (decide(F_OPEN, RET, false, -1) == 1) {
        errno = fail_errno;
        return -1;
    }
    return real_open(path, flags, mode);
}
int open64(const char *path, int flags, ...) __attribute__((alias("open")));

int openat(int dir, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(ap, mode_t) : 0;
    va_end(ap);
    if (decide(F_OPENAT, RET, false, -1) == 1) {
        errno = fail_errno;
        return -1;
    }
    return real_openat(dir, path, flags, mode);
}
int openat64(int dir, const char *path, int flags, ...) __attribute__((alias("openat")));

long syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
#ifdef SYS_openat2
    if (nr == SYS_openat2 && decide(F_OPENAT2, RET, false, -1) == 1) {
        errno = fail_errno;
        return -1;
    }
#endif
    return real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (decide(F_MMAP, RET, false, -1) == 1) {
        errno = fail_errno;
        return MAP_FAILED;
    }
    return real_mmap(addr, len, prot, flags, fd, off);
}
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
    __attribute__((alias("mmap")));

/* ---- reading and writing ---- */

ssize_t read(int fd, void *buf, size_t n)
{
    switch (decide(F_READ, RET, lib_socket_io(RET, fd), fd)) {
    case 1:
        errno = fail_errno;
        return -1;
    case 2:
        n = shorter(n);
    }
    return real_read(fd, buf, n);
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    switch (decide(F_PREAD, RET, false, -1)) {
    case 1:
        errno = fail_errno;
        return -1;
    case 2:
        n = shorter(n);
    }
    return real_pread(fd, buf, n, off);
}
ssize_t pread64(int fd, void *buf, size_t n, off_t off) __attribute__((alias("pread")));

ssize_t write(int fd, const void *buf, size_t n)
{
    switch (decide(F_WRITE, RET, lib_socket_io(RET, fd), fd)) {
    case 1:
        errno = fail_errno;
        return -1;
    case 2:
        n = shorter(n);
    }
    return real_write(fd, buf, n);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    switch (decide(F_WRITEV, RET, false, -1)) {
    case 1:
        errno = fail_errno;
        return -1;
    case 2: {
        /* the same vector cut at half its bytes */
        size_t total = 0;
        for (int i = 0; i < cnt; i++)
            total += iov[i].iov_len;
        size_t left = shorter(total);
        struct iovec cut[64];
        int k = 0;
        for (int i = 0; i < cnt && k < 64 && left > 0; i++) {
            size_t l = iov[i].iov_len < left ? iov[i].iov_len : left;
            cut[k++] = (struct iovec){.iov_base = iov[i].iov_base, .iov_len = l};
            left -= l;
        }
        return real_writev(fd, cut, k);
    }
    }
    return real_writev(fd, iov, cnt);
}

ssize_t send(int fd, const void *buf, size_t n, int flags)
{
    switch (decide(F_SEND, RET, false, -1)) {
    case 1:
        errno = fail_errno;
        return -1;
    case 2:
        n = shorter(n);
    }
    return real_send(fd, buf, n, flags);
}

ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
    switch (decide(F_SENDFILE, RET, false, -1)) {
    case 1:
        errno = fail_errno;
        return -1;
    case 2:
        n = shorter(n);
    }
    return real_sendfile(out, in, off, n);
}
ssize_t sendfile64(int out, int in, off_t *off, size_t n) __attribute__((alias("sendfile")));

int accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
    if (decide(F_ACCEPT4, RET, false, -1) == 1) {
        errno = fail_errno;
        return -1;
    }
    return real_accept4(fd, sa, len, flags);
}
