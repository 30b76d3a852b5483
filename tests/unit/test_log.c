/* test_log.c - the error log's rate limiter and level names. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/log.h"
#include "test.h"

TEST(limit_per_second)
{
    struct log_limit l = {0};
    uint32_t report = 99;
    int allowed = 0;
    for (int i = 0; i < 100; i++)
        allowed += log_limit_allow(&l, 1000, 10, &report);
    CHECK_EQ_INT(allowed, 10);
    CHECK_EQ_INT(report, 0);
    /* the next second: allowed again, and the 90 held back are reported once */
    CHECK(log_limit_allow(&l, 1001, 10, &report));
    CHECK_EQ_INT(report, 90);
    CHECK(log_limit_allow(&l, 1001, 10, &report));
    CHECK_EQ_INT(report, 0);
    CHECK(log_limit_allow(&l, 1005, 10, &report));
    CHECK_EQ_INT(report, 0);
}

TEST(levels)
{
    enum log_level v;
    CHECK(log_level_parse("error", &v) == 0 && v == LOG_ERROR);
    CHECK(log_level_parse("warn", &v) == 0 && v == LOG_WARN);
    CHECK(log_level_parse("info", &v) == 0 && v == LOG_INFO);
    CHECK(log_level_parse("debug", &v) == 0 && v == LOG_DEBUG);
    CHECK(log_level_parse("loud", &v) < 0);
}

TEST(lines_and_flood)
{
    char path[] = "/tmp/test_log.XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    log_setup(fd, LOG_WARN);
    log_msg(LOG_INFO, "not written");
    log_msg(LOG_ERROR, "bad\nbyte");
    for (int i = 0; i < 50; i++)
        LOG_LIMITED(LOG_WARN, "flood %d", i);
    log_setup(2, LOG_INFO);
    char buf[4096] = {0};
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    CHECK(n > 0);
    CHECK(!strstr(buf, "not written"));
    CHECK(strstr(buf, " [error] bad?byte\n") != NULL);
    int lines = 0;
    for (char *p = buf; (p = strstr(p, "[warn] flood")); p++)
        lines++;
    /* at most a second boundary apart: 10, or 20 when the loop straddled one */
    CHECK(lines == 10 || lines == 20);
    close(fd);
    unlink(path);
}

int main(void)
{
    RUN(limit_per_second);
    RUN(levels);
    RUN(lines_and_flood);
    return test_summary();
}
