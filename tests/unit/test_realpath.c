#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "files/realpath.h"

static char base[PATH_MAX], root[PATH_MAX + 16], outside[PATH_MAX + 16];
static int root_fd = -1;

static void put(const char *dir, const char *name, const char *text)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void link_to(const char *target, const char *name)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/%s", root, name);
    CHECK_EQ_INT(symlink(target, p), 0);
}

static void mkd(const char *dir, const char *name)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    CHECK_EQ_INT(mkdir(p, 0755), 0);
}

/* root/    a.txt dir/b.txt dir/sub/c.txt and links; outside/secret */
static void setup(void)
{
    char tmpl[] = "/tmp/colibri-realpath-XXXXXX";
    CHECK(mkdtemp(tmpl) != NULL);
    CHECK(realpath(tmpl, base) != NULL);
    snprintf(root, sizeof(root), "%s/root", base);
    snprintf(outside, sizeof(outside), "%s/outside", base);
    CHECK_EQ_INT(mkdir(root, 0755), 0);
    CHECK_EQ_INT(mkdir(outside, 0755), 0);
    put(outside, "secret", "SECRET");
    put(root, "a.txt", "A");
    mkd(root, "dir");
    mkd(root, "dir/sub");
    put(root, "dir/b.txt", "B");
    put(root, "dir/sub/c.txt", "C");
    link_to("a.txt", "link_in");
    link_to("dir", "link_dir");
    link_to("../outside/secret", "link_up");
    link_to("../a.txt", "dir/link_rel");
    link_to("../../outside/secret", "dir/link_rel_out");
    link_to("sub/../../a.txt", "dir/link_dotdot");
    link_to("link_dir/sub/c.txt", "chain");
    link_to("loop2", "loop1");
    link_to("loop1", "loop2");
    link_to("nope", "dangling");
    link_to("/", "slash");
    char t[PATH_MAX * 2];
    snprintf(t, sizeof(t), "%s/a.txt", root);
    link_to(t, "abs_in");
    snprintf(t, sizeof(t), "%s/dir/", root);
    link_to(t, "abs_dir");
    snprintf(t, sizeof(t), "%s/secret", outside);
    link_to(t, "abs_out");
    snprintf(t, sizeof(t), "%s", outside);
    link_to(t, "abs_outdir");
    /* a name that starts like the root but is not below it */
    snprintf(t, sizeof(t), "%s/root-evil", base);
    CHECK_EQ_INT(mkdir(t, 0755), 0);
    put(t, "x", "EVIL");
    snprintf(t, sizeof(t), "%s/root-evil/x", base);
    link_to(t, "abs_prefix");
    root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(root_fd >= 0);
}

static void teardown(void)
{
    char cmd[PATH_MAX + 32];
    close(root_fd);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
    CHECK_EQ_INT(system(cmd), 0);
}

static char res[PATH_MAX];

static ssize_t rp(const char *rel, enum files_follow f)
{
    res[0] = '\0';
    return files_realpath_at(root_fd, root, rel, strlen(rel), f, res, sizeof(res));
}

/* resolves to want (a canonical path) in every mode that allows links */
#define CHECK_RESOLVES(rel, f, want)                                                               \
    do {                                                                                           \
        ssize_t n_ = rp(rel, f);                                                                   \
        CHECK_EQ_INT(n_, (ssize_t)strlen(want));                                                   \
        CHECK_EQ_STR(res, want);                                                                   \
    } while (0)

/* the content of the file a canonical path opens to */
static const char *content(const char *canon)
{
    static char buf[64];
    int fd = files_open_resolved(root_fd, canon, O_RDONLY);
    if (fd < 0)
        return "(open failed)";
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

TEST(plain_paths)
{
    for (int f = FILES_FOLLOW_NEVER; f <= FILES_FOLLOW_ALWAYS; f++) {
        CHECK_RESOLVES("a.txt", f, "a.txt");
        CHECK_RESOLVES("/a.txt", f, "a.txt");
        CHECK_RESOLVES("//a.txt", f, "a.txt");
        CHECK_RESOLVES("./a.txt", f, "a.txt");
        CHECK_RESOLVES("dir//b.txt", f, "dir/b.txt");
        CHECK_RESOLVES("dir/./sub/c.txt", f, "dir/sub/c.txt");
        CHECK_RESOLVES("dir/sub/../b.txt", f, "dir/b.txt");
        CHECK_RESOLVES("dir/sub/../../a.txt", f, "a.txt");
        CHECK_RESOLVES("", f, "");
        CHECK_RESOLVES("/", f, "");
        CHECK_RESOLVES("dir/", f, "dir");
        CHECK_RESOLVES("dir/..", f, "");
    }
    CHECK_EQ_STR(content("a.txt"), "A");
    CHECK_EQ_STR(content("dir/sub/c.txt"), "C");
}

TEST(missing_and_not_dirs)
{
    CHECK_EQ_INT(rp("nope", FILES_FOLLOW_INSIDE), -ENOENT);
    CHECK_EQ_INT(rp("nope/a.txt", FILES_FOLLOW_INSIDE), -ENOENT);
    CHECK_EQ_INT(rp("a.txt/x", FILES_FOLLOW_INSIDE), -ENOTDIR);
    CHECK_EQ_INT(rp("dangling", FILES_FOLLOW_INSIDE), -ENOENT);
    /* a NUL inside the bytes is never a shorter name */
    CHECK_EQ_INT(
        files_realpath_at(root_fd, root, "a.txt\0.png", 10, FILES_FOLLOW_INSIDE, res, sizeof(res)),
        -EINVAL);
}

TEST(dotdot_above_root)
{
    const char *escapes[] = {"..",
                             "../",
                             "../outside/secret",
                             "dir/../../outside/secret",
                             "dir/sub/../../..",
                             "./../root/a.txt",
                             "/../a.txt"};
    for (size_t i = 0; i < N_ELEMENTS(escapes); i++) {
        CHECK_EQ_INT(rp(escapes[i], FILES_FOLLOW_NEVER), -EXDEV);
        CHECK_EQ_INT(rp(escapes[i], FILES_FOLLOW_INSIDE), -EXDEV);
    }
    /* "always" leaves the root only as the file system does */
    char want[PATH_MAX * 2];
    snprintf(want, sizeof(want), "%s/secret", outside);
    CHECK_RESOLVES("../outside/secret", FILES_FOLLOW_ALWAYS, want);
    snprintf(want, sizeof(want), "%s/a.txt", root);
    CHECK_RESOLVES("./../root/a.txt", FILES_FOLLOW_ALWAYS, want);
}

TEST(links_inside)
{
    CHECK_EQ_INT(rp("link_in", FILES_FOLLOW_NEVER), -ELOOP);
    CHECK_EQ_INT(rp("link_dir/b.txt", FILES_FOLLOW_NEVER), -ELOOP);
    CHECK_RESOLVES("link_in", FILES_FOLLOW_INSIDE, "a.txt");
    CHECK_RESOLVES("link_dir/b.txt", FILES_FOLLOW_INSIDE, "dir/b.txt");
    CHECK_RESOLVES("link_dir/link_rel", FILES_FOLLOW_INSIDE, "a.txt");
    CHECK_RESOLVES("dir/link_dotdot", FILES_FOLLOW_INSIDE, "a.txt");
    CHECK_RESOLVES("chain", FILES_FOLLOW_INSIDE, "dir/sub/c.txt");
    CHECK_RESOLVES("abs_in", FILES_FOLLOW_INSIDE, "a.txt");
    CHECK_RESOLVES("abs_dir/sub/c.txt", FILES_FOLLOW_INSIDE, "dir/sub/c.txt");
    CHECK_RESOLVES("link_dir/sub/..", FILES_FOLLOW_INSIDE, "dir");
    int dfd = files_open_resolved(root_fd, res, O_RDONLY | O_DIRECTORY);
    CHECK(dfd >= 0);
    close(dfd);
    CHECK_RESOLVES("chain", FILES_FOLLOW_ALWAYS, "dir/sub/c.txt");
    CHECK_EQ_STR(content("dir/sub/c.txt"), "C");
}

TEST(links_outside)
{
    const char *out[] = {"link_up",           "dir/link_rel_out", "abs_out",
                         "abs_outdir/secret", "abs_prefix",       "slash",
                         "slash/etc/passwd"};
    for (size_t i = 0; i < N_ELEMENTS(out); i++) {
        CHECK_EQ_INT(rp(out[i], FILES_FOLLOW_INSIDE), -EXDEV);
        CHECK_EQ_INT(rp(out[i], FILES_FOLLOW_NEVER), -ELOOP);
    }
    char want[PATH_MAX * 2];
    snprintf(want, sizeof(want), "%s/secret", outside);
    CHECK_RESOLVES("link_up", FILES_FOLLOW_ALWAYS, want);
    CHECK_EQ_STR(content(res), "SECRET");
    CHECK_RESOLVES("abs_out", FILES_FOLLOW_ALWAYS, want);
    CHECK_RESOLVES("abs_outdir/secret", FILES_FOLLOW_ALWAYS, want);
    CHECK_RESOLVES("slash", FILES_FOLLOW_ALWAYS, "/");
    CHECK_RESOLVES("slash/..", FILES_FOLLOW_ALWAYS, "/");
}

TEST(loops_and_lengths)
{
    CHECK_EQ_INT(rp("loop1", FILES_FOLLOW_INSIDE), -ELOOP);
    CHECK_EQ_INT(rp("loop1", FILES_FOLLOW_ALWAYS), -ELOOP);
    char name[NAME_MAX + 2];
    memset(name, 'x', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    CHECK_EQ_INT(rp(name, FILES_FOLLOW_INSIDE), -ENAMETOOLONG);
    char *longp = malloc(PATH_MAX + 10);
    memset(longp, 'a', PATH_MAX + 9);
    for (int i = 1; i < PATH_MAX + 9; i += 2)
        longp[i] = '/';
    longp[PATH_MAX + 9] = '\0';
    CHECK_EQ_INT(rp(longp, FILES_FOLLOW_INSIDE), -ENAMETOOLONG);
    free(longp);
    /* the output buffer bounds the result too */
    char small[4];
    CHECK_EQ_INT(
        files_realpath_at(root_fd, root, "dir/b.txt", 9, FILES_FOLLOW_INSIDE, small, sizeof(small)),
        -ENAMETOOLONG);
    CHECK_EQ_INT(
        files_realpath_at(root_fd, root, "a.txt", 5, FILES_FOLLOW_INSIDE, small, sizeof(small)),
        -ENAMETOOLONG);
}

TEST(open_refuses_links)
{
    /* what files_realpath_at never returns, files_open_resolved refuses:
     * a path with a link in it (as after a swap between the two calls) */
    CHECK(files_open_resolved(root_fd, "link_in", O_RDONLY) < 0);
    CHECK(files_open_resolved(root_fd, "link_dir/b.txt", O_RDONLY) < 0);
    CHECK(files_open_resolved(root_fd, "link_up", O_RDONLY) < 0);
    CHECK(files_open_resolved(root_fd, "../outside/secret", O_RDONLY) < 0);
    int fd = files_open_resolved(root_fd, "", O_RDONLY | O_DIRECTORY);
    CHECK(fd >= 0);
    struct stat a, b;
    CHECK_EQ_INT(fstat(fd, &a), 0);
    CHECK_EQ_INT(fstat(root_fd, &b), 0);
    CHECK(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
    close(fd);
    fd = files_open_resolved(root_fd, "a.txt", O_RDONLY);
    CHECK_EQ_INT(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    close(fd);
}

int main(void)
{
    setup();
    RUN(plain_paths);
    RUN(missing_and_not_dirs);
    RUN(dotdot_above_root);
    RUN(links_inside);
    RUN(links_outside);
    RUN(loops_and_lengths);
    RUN(open_refuses_links);
    teardown();
    return test_summary();
}
