/* file.c - templates from files: tpl_compile_file() (tpl.h) and the loader
 * it gives the compiler, which finds partials beside the template.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "tpl/tpl.h"
#include "tpl/tpl_internal.h"

#define MAX_FILE (16u << 20) /* bytes of one template file */

/* Appends the regular file at path; -EISDIR for anything else (O_NONBLOCK:
 * a FIFO must not block the compile). */
static int read_file(const char *path, struct strbuf *sb)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    struct stat st;
    size_t start = sb->len;
    int r = 0;
    if (fstat(fd, &st) < 0)
        r = -errno;
    else if (!S_ISREG(st.st_mode))
        r = -EISDIR;
    else if (st.st_size > MAX_FILE)
        r = -EFBIG;
    else
        r = strbuf_reserve(sb, (size_t)st.st_size);
    while (r == 0) {
        ssize_t n = read(fd, sb->buf + sb->len, sb->cap - sb->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            r = n < 0 ? -errno : 0;
            break;
        }
        sb->len += (size_t)n;
        if (sb->len == sb->cap && sb->len - start >= MAX_FILE)
            r = -EFBIG;
        else if (sb->len == sb->cap)
            r = strbuf_reserve(sb, 4096);
    }
    if (sb->buf)
        sb->buf[sb->len] = '\0';
    close(fd);
    return r;
}

/* Partials live beside the template: "name", else "name.mustache". */
static int load_file(void *ctx, const char *name, size_t len, struct strbuf *src)
{
    const char *dir = ctx;
    if (memchr(name, '/', len) || memchr(name, '\0', len) || strcmp(name, ".") == 0 ||
        strcmp(name, "..") == 0)
        return -ENOENT;
    struct strbuf path = {0};
    size_t before = src->len;
    int r = strbuf_printf(&path, "%s/%s", dir, name);
    if (r == 0) {
        r = read_file(path.buf, src);
        if ((r == -ENOENT || r == -EISDIR) && (r = strbuf_append_str(&path, ".mustache")) == 0) {
            src->len = before;
            r = read_file(path.buf, src);
        }
    }
    if (r < 0)
        src->len = before;
    if (r == -EISDIR) /* only files are partials */
        r = -ENOENT;
    strbuf_free(&path);
    return r;
}

struct tpl *tpl_compile_file(const char *path, const struct tpl_desc *root, char *err,
                             size_t errlen)
{
    struct view name = {path, strlen(path)};
    struct strbuf src = {0};
    struct tpl *t = NULL;
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
    if (!dir) {
        tpl_error(err, errlen, -ENOMEM, name, (struct tpl_pos){0, 0}, "out of memory");
        goto out_free_src;
    }
    int r = read_file(path, &src);
    if (r < 0) {
        tpl_error(err, errlen, r, name, (struct tpl_pos){0, 0}, "%s", strerror(-r));
        goto out_free_dir;
    }
    struct tpl_env env = {.root = root, .loader = {.load = load_file, .ctx = dir}};
    t = tpl_compile_env(name, (struct view){src.buf, src.len}, &env, err, errlen);
    if (t) {
        t->dir = dir;
        goto out_free_src;
    }
out_free_dir:
    free(dir);
out_free_src:
    strbuf_free(&src);
    return t;
}
