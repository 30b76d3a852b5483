#include "base/common.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

size_t host_name_match(const char *site, size_t site_len, const char *name, size_t len)
{
    if (site_len >= 2 && site[0] == '*' && site[1] == '.') {
        size_t suffix = site_len - 1; /* ".example.com" */
        if (len > suffix && name[len - suffix - 1] != '.' &&
            mem_case_eq(name + len - suffix, site + 1, suffix))
            return suffix;
        return 0;
    }
    return site_len == len && mem_case_eq(name, site, len) ? SIZE_MAX : 0;
}

bool mem_case_eq(const char *a, const char *b, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
        if (x != y && (x | 0x20) != (y | 0x20))
            return false;
        /* (x|0x20)==(y|0x20) also matches pairs like '@' and '`': only
         * letters may differ by case. */
        if (x != y && !((x | 0x20) >= 'a' && (x | 0x20) <= 'z'))
            return false;
    }
    return true;
}

int pread_full(int fd, void *buf, size_t len, off_t off)
{
    char *p = buf;
    while (len) {
        ssize_t n = pread(fd, p, len, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO; /* shorter than the caller was told */
        p += n;
        len -= (size_t)n;
        off += n;
    }
    return 0;
}

int open_regular(const char *path, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -errno;
    int r = fstat(fd, st) < 0       ? -errno
            : S_ISDIR(st->st_mode)  ? -EISDIR
            : !S_ISREG(st->st_mode) ? -EINVAL
                                    : 0;
    if (r) {
        close(fd);
        return r;
    }
    return fd;
}

int write_full(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -ENOSPC;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}
