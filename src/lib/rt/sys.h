/* sys.h - the system calls of the request path, without glibc's
 * cancellation wrappers.
 *
 * read(), writev() and epoll_wait() are POSIX cancellation points, so glibc
 * brackets each with __pthread_enable_asynccancel()/..._disable_...(): about
 * 45 instructions a call, three calls a keep-alive request. colibri never
 * cancels a thread, so the request path calls the kernel through syscall(),
 * which has the same result and errno convention and no bracket. The system
 * call numbers are those glibc uses, so a seccomp filter sees no difference.
 *
 * Sanitizer builds keep the libc functions: ASan checks the buffers they are
 * given and TSan derives synchronisation from them. So does a build with
 * COLIBRI_LIBC_IO defined (-DCOLIBRI_LIBC_IO), for tools that interpose
 * the libc functions (fault injection through LD_PRELOAD, ltrace).
 */
#pragma once

#include <sys/epoll.h>
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

static inline ssize_t sys_read(int fd, void *buf, size_t len)
{
#ifdef SYS_PLAIN_LIBC
    return read(fd, buf, len);
#else
    return syscall(SYS_read, fd, buf, len);
#endif
}

static inline ssize_t sys_writev(int fd, const struct iovec *iov, int iovcnt)
{
#ifdef SYS_PLAIN_LIBC
    return writev(fd, iov, iovcnt);
#else
    return syscall(SYS_writev, fd, iov, iovcnt);
#endif
}

static inline int sys_epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
#if defined(SYS_PLAIN_LIBC) || !defined(SYS_epoll_wait)
    return epoll_wait(epfd, ev, max, timeout); /* newer ports have only epoll_pwait */
#else
    return (int)syscall(SYS_epoll_wait, epfd, ev, max, timeout);
#endif
}
