/* realpath.c - canonical paths below a root fd, and opening them safely.
 *
 * The walk keeps two strings: the canonical prefix found so far (out), which
 * holds no symbolic link, and the components still to resolve (todo). Each
 * new component is appended to out and asked readlinkat(): EINVAL means it
 * is no link and stays; a link is taken out again and its target is put in
 * front of todo. The buffers live on the heap: this runs on small coroutine
 * stacks. */
#include "files/realpath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "base/common.h"

struct walk {
    char todo[PATH_MAX]; /* components not resolved yet */
    char link[PATH_MAX]; /* readlinkat() target */
    char spare[PATH_MAX];
};

/* Replaces todo with "target/rest". */
static int push_front(struct walk *w, const char *target, size_t tlen, const char *rest,
                      size_t rlen)
{
    if (tlen + 1 + rlen >= sizeof(w->spare))
        return -ENAMETOOLONG;
    memcpy(w->spare, target, tlen);
    w->spare[tlen] = '/';
    memcpy(w->spare + tlen + 1, rest, rlen);
    w->spare[tlen + 1 + rlen] = '\0';
    memcpy(w->todo, w->spare, tlen + 1 + rlen + 1);
    return 0;
}

/* Drops the last component of out (len bytes); absolute paths keep "/". */
static size_t pop(char *out, size_t len)
{
    while (len > 0 && out[len - 1] != '/')
        len--;
    if (len > 1 || (len == 1 && out[0] != '/'))
        len--; /* the separator, unless it is the leading slash */
    out[len] = '\0';
    return len;
}

static ssize_t walk(struct walk *w, int root_fd, const char *root_abs, enum files_follow follow,
                    char *out, size_t outlen)
{
    size_t olen = 0, root_len = strlen(root_abs);
    unsigned links = 0;
    const char *p = w->todo;
    out[0] = '\0';

    for (;;) {
        while (*p == '/')
            p++;
        if (!*p)
            return (ssize_t)olen;
        const char *end = strchrnul(p, '/');
        size_t clen = (size_t)(end - p);
        if (clen > NAME_MAX)
            return -ENAMETOOLONG;
        if (clen == 1 && p[0] == '.') {
            p = end;
            continue;
        }
        bool absolute = out[0] == '/';
        if (clen == 2 && p[0] == '.' && p[1] == '.') {
            if (olen == 0) {
                if (follow != FILES_FOLLOW_ALWAYS)
                    return -EXDEV;
                /* leaving the root: go on from its real place */
                if (root_len + 1 > outlen)
                    return -ENAMETOOLONG;
                memcpy(out, root_abs, root_len + 1);
                olen = root_len;
            }
            olen = pop(out, olen);
            p = end;
            continue;
        }
        size_t sep = olen && !(absolute && olen == 1) ? 1 : 0;
        if (olen + sep + clen + 1 > outlen)
            return -ENAMETOOLONG;
        size_t before = olen;
        if (sep)
            out[olen++] = '/';
        memcpy(out + olen, p, clen);
        olen += clen;
        out[olen] = '\0';
        p = end;

        ssize_t n = readlinkat(absolute ? AT_FDCWD : root_fd, out, w->link, sizeof(w->link));
        if (n < 0) {
            if (errno == EINVAL)
                continue; /* not a link: the component stays */
            return -errno;
        }
        if ((size_t)n >= sizeof(w->link))
            return -ENAMETOOLONG;
        if (follow == FILES_FOLLOW_NEVER || ++links > FILES_MAX_LINKS)
            return -ELOOP;
        olen = before;
        out[olen] = '\0';
        const char *target = w->link;
        size_t tlen = (size_t)n;
        if (target[0] == '/') {
            if (follow == FILES_FOLLOW_ALWAYS) {
                out[0] = '/';
                out[1] = '\0';
                olen = 1;
            } else if (tlen >= root_len && !memcmp(target, root_abs, root_len) &&
                       (tlen == root_len || target[root_len] == '/' || root_len == 1)) {
                /* an absolute link back into the root */
                target += root_len;
                tlen -= root_len;
                olen = 0;
                out[0] = '\0';
            } else {
                return -EXDEV;
            }
        }
        int r = push_front(w, target, tlen, p, strlen(p));
        if (r)
            return r;
        p = w->todo;
    }
}

ssize_t files_realpath_at(int root_fd, const char *root_abs, const char *rel, size_t len,
                          enum files_follow follow, char *out, size_t outlen)
{
    if (memchr(rel, '\0', len))
        return -EINVAL;
    if (outlen < 2)
        return -ENAMETOOLONG;
    struct walk *w = malloc(sizeof(*w));
    if (!w)
        return -ENOMEM;
    ssize_t r = -ENAMETOOLONG;
    if (len < sizeof(w->todo)) {
        memcpy(w->todo, rel, len);
        w->todo[len] = '\0';
        r = walk(w, root_fd, root_abs, follow, out, outlen);
    }
    free(w);
    return r;
}

#ifdef SYS_openat2
static int open_kernel_beneath(int root_fd, const char *path, int flags)
{
    struct open_how how = {
        .flags = (uint64_t)flags,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    int fd = (int)syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
    return fd < 0 ? -errno : fd;
}
#else
static int open_kernel_beneath(int root_fd, const char *path, int flags)
{
    (void)root_fd, (void)path, (void)flags;
    return -ENOSYS;
}
#endif

/* Without openat2: one openat(O_NOFOLLOW) per component. */
static int open_walk_beneath(int root_fd, const char *path, int flags)
{
    int fd = root_fd;
    char comp[NAME_MAX + 1];
    for (;;) {
        while (*path == '/')
            path++;
        const char *end = strchrnul(path, '/');
        size_t len = (size_t)(end - path);
        const char *rest = end;
        while (*rest == '/')
            rest++;
        bool last = !*rest;
        if (len > NAME_MAX) {
            if (fd != root_fd)
                close(fd);
            return -ENAMETOOLONG;
        }
        memcpy(comp, len ? path : ".", len ? len : 1);
        comp[len ? len : 1] = '\0';
        int next = openat(
            fd, comp, last ? flags | O_NOFOLLOW : O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        if (fd != root_fd)
            close(fd);
        if (next < 0)
            return -e;
        if (last)
            return next;
        fd = next;
        path = rest;
    }
}

int files_open_resolved(int root_fd, const char *path, int flags)
{
    flags |= O_CLOEXEC;
    if (path[0] == '/') {
        int fd = open(path, flags);
        return fd < 0 ? -errno : fd;
    }
    const char *p = path[0] ? path : ".";
    int fd = open_kernel_beneath(root_fd, p, flags);
    if (fd == -ENOSYS)
        fd = open_walk_beneath(root_fd, p, flags);
    return fd;
}
