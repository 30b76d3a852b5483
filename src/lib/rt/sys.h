/* sys.h - the system calls of the request path, without glibc's
 * cancellation wrappers.
 *
 * read(), writev(), send() and epoll_wait() are POSIX cancellation points,
 * so glibc brackets each with __pthread_enable_asynccancel()/..._disable_...():
 * about 45 instructions a call, three calls a keep-alive request. colibri
 * never cancels a thread, so the request path calls the kernel through
 * syscall(), which has the same result and errno convention and no
 * bracket. The system call numbers are those glibc uses (but send(), which
 * becomes sendmsg(); the sandbox allows both), so a seccomp filter sees no
 * difference.
 *
 * Sanitizer builds keep the libc functions: ASan checks the buffers they are
 * given and TSan derives synchronisation from them. So does a build with
 * COLIBRI_LIBC_IO defined (-DCOLIBRI_LIBC_IO), for tools that interpose
 * the libc functions (fault injection through LD_PRELOAD, ltrace).
 *
 * On x86-64 the `syscall` instruction is issued inline (sys_call4) rather
 * than through libc's syscall(), a function that shuffles its seven
 * arguments into place: about 15 instructions less a call.
 */
#pragma once

#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#if defined(COLIBRI_LIBC_IO) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SYS_PLAIN_LIBC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SYS_PLAIN_LIBC 1
#endif
#endif

#if !defined(SYS_PLAIN_LIBC) && defined(__x86_64__)
/* syscall() without the call: number in rax, arguments in rdi, rsi, rdx,
 * r10; the instruction overwrites rcx and r11; the kernel answers -errno
 * (-4095..-1) on failure, turned into -1 and errno as syscall() does. */
static inline long sys_call4(long n, long a, long b, long c, long d)
{
    register long r10 __asm__("r10") = d;
    long r;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    if (__builtin_expect((unsigned long)r > -4096UL, 0)) {
        errno = (int)-r;
        return -1;
    }
    return r;
}
#elif !defined(SYS_PLAIN_LIBC)
#define sys_call4(n, a, b, c, d) syscall(n, a, b, c, d)
#endif

static inline ssize_t sys_read(int fd, void *buf, size_t len)
{
#ifdef SYS_PLAIN_LIBC
    return read(fd, buf, len);
#else
    return sys_call4(SYS_read, fd, (long)buf, (long)len, 0);
#endif
}

static inline ssize_t sys_writev(int fd, const struct iovec *iov, int iovcnt)
{
#ifdef SYS_PLAIN_LIBC
    return writev(fd, iov, iovcnt);
#else
    return sys_call4(SYS_writev, fd, (long)iov, iovcnt, 0);
#endif
}

/* send(fd, buf, len, MSG_MORE | MSG_NOSIGNAL): glibc's send() is a
 * cancellation point too. Issued as sendmsg() of one piece, which takes
 * three arguments (sendto() takes six). */
static inline ssize_t sys_send_more(int fd, const void *buf, size_t len)
{
#ifdef SYS_PLAIN_LIBC
    return send(fd, buf, len, MSG_MORE | MSG_NOSIGNAL);
#else
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    return sys_call4(SYS_sendmsg, fd, (long)&msg, MSG_MORE | MSG_NOSIGNAL, 0);
#endif
}

static inline int sys_epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
#if defined(SYS_PLAIN_LIBC) || !defined(SYS_epoll_wait)
    return epoll_wait(epfd, ev, max, timeout); /* newer ports have only epoll_pwait */
#else
    return (int)sys_call4(SYS_epoll_wait, epfd, (long)ev, max, timeout);
#endif
}
