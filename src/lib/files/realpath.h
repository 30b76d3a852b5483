/* realpath.h - realpath() below a directory fd, with the -at calls.
 *
 * files_realpath_at() turns a path relative to a root directory into its
 * canonical form, one component at a time with readlinkat(): no ".", ".."
 * or empty segments and no symbolic links are left, and the policy decides
 * what a link may do. The canonical path is then opened with
 * files_open_resolved(), which refuses every symbolic link and every step
 * out of the root (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, or a walk
 * with O_NOFOLLOW on kernels without it), so a link swapped in between the
 * two calls cannot lead outside either.
 *
 * Pure system-call code with no shared state: any thread may call it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

enum files_follow {
    FILES_FOLLOW_NEVER,  /* any symbolic link on the way: -ELOOP */
    FILES_FOLLOW_INSIDE, /* links are followed while they stay below the root */
    FILES_FOLLOW_ALWAYS, /* links are followed anywhere (the result may be absolute) */
};

/* More links than this on one lookup: -ELOOP (as the kernel's limit). */
#define FILES_MAX_LINKS 40

/* Resolves the len bytes at rel (leading slashes ignored) below root_fd,
 * whose canonical absolute path is root_abs (used to accept absolute links
 * that point back inside the root). Writes the canonical path into out (at
 * most outlen bytes with the NUL): relative to the root, "" for the root
 * itself, or absolute (starting with '/') only with FILES_FOLLOW_ALWAYS
 * after a link led outside. Returns its length or -errno:
 *   -ENOENT, -ENOTDIR, -EACCES  as the file system says
 *   -ELOOP         a link with FILES_FOLLOW_NEVER, or too many links
 *   -EXDEV         the path or a link leads outside the root
 *   -ENAMETOOLONG  a component over NAME_MAX, or a path over outlen/PATH_MAX
 *   -EINVAL        rel contains a NUL byte */
ssize_t files_realpath_at(int root_fd, const char *root_abs, const char *rel, size_t len,
                          enum files_follow follow, char *out, size_t outlen);

/* Opens a canonical path from files_realpath_at() with flags (O_CLOEXEC is
 * added): relative ones below root_fd without following any link, absolute
 * ones as they are. Returns the fd or -errno. */
int files_open_resolved(int root_fd, const char *path, int flags);
