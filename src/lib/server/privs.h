/* privs.h - "user" and "chroot": giving up root once the listeners are
 * bound and the config's files are open. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct privs {
    bool set; /* "user" was given */
    uid_t uid;
    gid_t gid;
    char name[64];    /* the passwd name, for the supplementary groups; "" if none */
    char *chroot_dir; /* owned; NULL: no chroot */
};

/* "user = NAME" (or a number): looked up now. 0, or -errno with why set:
 * an unknown user, or a user we cannot become (not running as root, and
 * not that user already). */
int privs_set_user(struct privs *p, const char *value, char *why, size_t len);
/* "chroot = DIR": an existing directory; needs root. */
int privs_set_chroot(struct privs *p, const char *dir, char *why, size_t len);
/* chroot + chdir("/") if asked, then the supplementary groups, the group
 * and the user, each checked; and a check that root cannot be had back.
 * Without "user": nothing, but a warning on stderr when running as root.
 * 0 or -errno with err set. */
int privs_drop(const struct privs *p, char *err, size_t errlen);
