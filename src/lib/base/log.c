/* log.c - the error log (see log.h). */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"

enum log_level log_max_level = LOG_INFO;
static int the_fd = 2;

static const char *const names[] = {"error", "warn", "info", "debug"};

void log_setup(int fd, enum log_level level)
{
    the_fd = fd;
    log_max_level = level;
}

int log_fd(void)
{
    return the_fd;
}

int log_level_parse(const char *s, enum log_level *out)
{
    for (size_t i = 0; i < N_ELEMENTS(names); i++)
        if (!strcmp(s, names[i])) {
            *out = (enum log_level)i;
            return 0;
        }
    return -1;
}

static void vlog(enum log_level level, uint32_t suppressed, const char *fmt, va_list ap)
{
    char line[1024];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    size_t n = strftime(line, sizeof(line), "%Y/%m/%d %H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof(line) - n, " [%s] ", names[level]);
    size_t start = n;
    int k = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
    if (k < 0)
        k = 0;
    n = MIN(n + (size_t)k, sizeof(line) - 2);
    for (size_t i = start; i < n; i++)
        if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
            line[i] = '?';
    line[n++] = '\n';
    char both[1100];
    const char *out = line;
    if (suppressed) { /* the report and the line in one write */
        int m = snprintf(both, sizeof(both), "%.*s... suppressed %u similar messages\n%.*s",
                         (int)start, line, suppressed, (int)n, line);
        if (m > 0 && (size_t)m < sizeof(both)) {
            out = both;
            n = (size_t)m;
        }
    }
    int w = write_full(the_fd, out, n);
    (void)w; /* nowhere left to report to */
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(level, 0, fmt, ap);
    va_end(ap);
}

bool log_limit_allow(struct log_limit *l, int64_t now, uint32_t max, uint32_t *report)
{
    *report = 0;
    int64_t s = atomic_load_explicit(&l->sec, memory_order_relaxed);
    if (s != now && atomic_compare_exchange_strong(&l->sec, &s, now)) {
        atomic_store(&l->n, 1);
        *report = atomic_exchange(&l->held, 0);
        return true;
    }
    if (atomic_fetch_add(&l->n, 1) < max)
        return true;
    atomic_fetch_add(&l->held, 1);
    return false;
}

void log_limited(struct log_limit *l, enum log_level level, const char *fmt, ...)
{
    uint32_t report;
    if (!log_limit_allow(l, (int64_t)time(NULL), LOG_LIMIT_PER_SEC, &report))
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(level, report, fmt, ap);
    va_end(ap);
}
