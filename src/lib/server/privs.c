/* privs.c - dropping root: chroot, groups, gid, uid, in that order (the
 * groups and the gid can only be changed while still root; the chroot
 * needs root too, and the group list is read before it, while /etc is
 * still there). */
#include "server/privs.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"

int privs_set_user(struct privs *p, const char *value, char *why, size_t len)
{
    struct passwd *pw = getpwnam(value);
    char *end;
    if (pw) {
        p->uid = pw->pw_uid;
        p->gid = pw->pw_gid;
        snprintf(p->name, sizeof(p->name), "%s", pw->pw_name);
    } else {
        /* a number with no passwd entry (a container's bare uid): that uid,
         * the group of the same number, no supplementary groups */
        unsigned long v = value[0] >= '0' && value[0] <= '9' ? strtoul(value, &end, 10) : 0;
        if (value[0] < '0' || value[0] > '9' || *end || v >= (uid_t)-1)
            return err_set(why, len, -ENOENT, NULL, "unknown user '%s'", value);
        p->uid = (uid_t)v;
        p->gid = (gid_t)v;
        if ((pw = getpwuid(p->uid))) {
            p->gid = pw->pw_gid;
            snprintf(p->name, sizeof(p->name), "%s", pw->pw_name);
        } else {
            p->name[0] = '\0';
        }
    }
    if (geteuid() != 0 && (p->uid != geteuid() || p->gid != getegid()))
        return err_set(why, len, -EPERM, NULL,
                       "cannot become user '%s' (uid %u): not running as root (uid %u)", value,
                       (unsigned)p->uid, (unsigned)geteuid());
    p->set = true;
    return 0;
}

int privs_set_chroot(struct privs *p, const char *dir, char *why, size_t len)
{
    struct stat st;
    if (dir[0] != '/')
        return err_set(why, len, -EINVAL, NULL, "'%s' must be an absolute path", dir);
    if (stat(dir, &st) < 0)
        return err_set(why, len, -errno, NULL, "'%s': %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return err_set(why, len, -ENOTDIR, NULL, "'%s' is not a directory", dir);
    if (geteuid() != 0)
        return err_set(why, len, -EPERM, NULL, "needs root (running as uid %u)",
                       (unsigned)geteuid());
    free(p->chroot_dir);
    if (!(p->chroot_dir = strdup(dir)))
        return err_set(why, len, -ENOMEM, NULL, "out of memory");
    return 0;
}

static int set_ids(const struct privs *p, const gid_t *groups, int n, char *err, size_t errlen);

int privs_drop(const struct privs *p, char *err, size_t errlen)
{
    if (!p->set) /* the warning about root is the server's (server.c) */
        return 0;
    if (geteuid() != 0) /* already that user: privs_set_user() checked */
        return 0;
    int n = 1;
    gid_t *groups = malloc(sizeof(gid_t)), *more;
    if (!groups)
        return err_set(err, errlen, -ENOMEM, NULL, "out of memory");
    groups[0] = p->gid;
    /* getgrouplist() says how many there are when they do not fit */
    while (p->name[0] && getgrouplist(p->name, p->gid, groups, &n) < 0) {
        if (n > NGROUPS_MAX || !(more = realloc(groups, (size_t)n * sizeof(gid_t)))) {
            free(groups);
            return err_set(err, errlen, -E2BIG, NULL, "user '%s': too many groups", p->name);
        }
        groups = more;
    }
    int r = set_ids(p, groups, n, err, errlen);
    free(groups);
    return r;
}

static int set_ids(const struct privs *p, const gid_t *groups, int n, char *err, size_t errlen)
{
    if (p->chroot_dir && (chroot(p->chroot_dir) < 0 || chdir("/") < 0))
        return err_set(err, errlen, -errno, NULL, "chroot %s: %s", p->chroot_dir, strerror(errno));
    if (setgroups((size_t)n, groups) < 0)
        return err_set(err, errlen, -errno, NULL, "setgroups: %s", strerror(errno));
    if (setgid(p->gid) < 0)
        return err_set(err, errlen, -errno, NULL, "setgid %u: %s", (unsigned)p->gid,
                       strerror(errno));
    if (setuid(p->uid) < 0)
        return err_set(err, errlen, -errno, NULL, "setuid %u: %s", (unsigned)p->uid,
                       strerror(errno));
    /* all four ids changed, and root cannot come back */
    uid_t ruid, euid, suid;
    gid_t rgid, egid, sgid;
    if (getresuid(&ruid, &euid, &suid) < 0 || getresgid(&rgid, &egid, &sgid) < 0 ||
        ruid != p->uid || euid != p->uid || suid != p->uid || rgid != p->gid || egid != p->gid ||
        sgid != p->gid || (p->uid != 0 && setuid(0) == 0))
        return err_set(err, errlen, -EPERM, NULL, "privileges were not dropped to uid %u gid %u",
                       (unsigned)p->uid, (unsigned)p->gid);
    return 0;
}
