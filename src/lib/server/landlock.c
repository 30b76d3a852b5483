/* landlock.c - the file half of the sandbox (see sandbox.h): a Landlock
 * ruleset from the paths the server needs, made with the raw system
 * calls. Best effort across ABI versions: each right the kernel knows is
 * handled (denied unless a rule grants it), the ones it does not know are
 * left out, and the ruleset's size follows the ABI. */
#include <errno.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/err.h"
#include "colibri.h"
#include "server/sandbox.h"

/* newer than the headers of some systems (Debian 12's know ABI 2) */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP    (1ULL << 0) /* ABI 4 */
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define LANDLOCK_SCOPE_SIGNAL               (1ULL << 1)
#endif

/* struct landlock_ruleset_attr as ABI 6 knows it; older kernels get its
 * first 8 (ABI 1-3) or 16 (ABI 4-5) bytes */
struct ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

#define FS_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
/* what a rule on a file (not a folder) may hold */
#define FS_FILE_RIGHTS                                                                             \
    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |   \
     LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)

static uint64_t handled_fs(int abi)
{
    uint64_t fs = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0 to 12 */
    if (abi >= 2)
        fs |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5)
        fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    return fs;
}

int landlock_abi(char *why, size_t len)
{
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 0) {
        int e = errno;
        err_set(why, len, -e, NULL, "%s",
                e == ENOSYS       ? "this kernel was built without Landlock"
                : e == EOPNOTSUPP ? "Landlock is disabled on this kernel (boot option lsm=)"
                                  : strerror(e));
        return 0;
    }
    const char *cap = getenv("COLIBRI_SANDBOX_LANDLOCK_ABI");
    if (cap && cap[0]) {
        char *end;
        long v = strtol(cap, &end, 10);
        if (!*end && v >= 0 && v < abi)
            abi = v;
        if (abi == 0)
            err_set(why, len, -ENOSYS, NULL,
                    "COLIBRI_SANDBOX_LANDLOCK_ABI=%s stands for a kernel without it", cap);
    }
    return (int)abi;
}

/* The Landlock rights that stand for how. */
static uint64_t rights_of(unsigned how)
{
    uint64_t r = 0;
    if (how & (COLIBRI_PATH_READ | COLIBRI_PATH_WRITE))
        r |= FS_READ;
    if (how & COLIBRI_PATH_WRITE)
        r |= LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_MAKE_REG |
             LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE;
    if (how & SANDBOX_LOG_DIR) /* O_APPEND | O_CREAT: no reading, no truncating */
        r |= LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_MAKE_REG;
    if (how & SANDBOX_REMOVE_DIR)
        r |= LANDLOCK_ACCESS_FS_REMOVE_FILE;
    if (how & SANDBOX_RMDIR)
        r |= LANDLOCK_ACCESS_FS_REMOVE_DIR;
    return r;
}

#ifndef LANDLOCK_RULE_NET_PORT
#define LANDLOCK_RULE_NET_PORT 2
struct landlock_net_port_attr {
    uint64_t allowed_access;
    uint64_t port;
};
#endif

int landlock_ruleset(const struct sandbox *sb, int abi, const uint16_t *ports, unsigned n_ports,
                     char *err, size_t errlen)
{
    struct ruleset_attr attr = {.handled_access_fs = handled_fs(abi)};
    size_t size = sizeof(attr.handled_access_fs);
    if (abi >= 4) { /* bind refused; connect only to a gateway's upstream ports */
        attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
        size += sizeof(attr.handled_access_net);
    }
    if (abi >= 6) { /* no signals to processes outside, no abstract sockets */
        attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
        size += sizeof(attr.scoped);
    }
    int fd = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (fd < 0)
        return err_set(err, errlen, -errno, NULL, "landlock_create_ruleset: %s", strerror(errno));
    for (unsigned i = 0; abi >= 4 && i < n_ports; i++) {
        struct landlock_net_port_attr rule = {.allowed_access = LANDLOCK_ACCESS_NET_CONNECT_TCP,
                                              .port = ports[i]};
        if (syscall(SYS_landlock_add_rule, fd, LANDLOCK_RULE_NET_PORT, &rule, 0) < 0) {
            int e = errno;
            close(fd);
            return err_set(err, errlen, -e, NULL, "landlock_add_rule port %u: %s", ports[i],
                           strerror(e));
        }
    }
    for (unsigned i = 0; i < sb->n_paths; i++) {
        const struct sandbox_path *p = &sb->paths[i];
        if (p->fd < 0)
            continue;
        uint64_t want = rights_of(p->how) & attr.handled_access_fs;
        if (!p->is_dir)
            want &= FS_FILE_RIGHTS;
        struct landlock_path_beneath_attr rule = {.allowed_access = want, .parent_fd = p->fd};
        if (want && syscall(SYS_landlock_add_rule, fd, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) < 0) {
            int e = errno;
            close(fd);
            return err_set(err, errlen, -e, NULL, "landlock_add_rule '%s': %s", p->path,
                           strerror(e));
        }
    }
    return fd;
}

int landlock_restrict(int ruleset_fd)
{
    /* a thread's own flag: without it (or CAP_SYS_ADMIN) the call fails */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -errno;
    if (syscall(SYS_landlock_restrict_self, ruleset_fd, 0) < 0)
        return -errno;
    return 0;
}
