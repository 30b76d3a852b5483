/* log.h - the error log: leveled, rate-limited lines to one file
 * descriptor, for every layer (base/ holds it so that rt/ can report
 * without knowing the server). The server chooses the fd and the level at
 * start-up (server/logs.c); the default is stderr at info.
 *
 * A line is "2026/11/22 13:40:00 [error] message\n" (local time), written
 * with one write(), so lines of different threads never interleave. Bytes
 * below 0x20 and 0x7f in a message become '?': a client's bytes in a
 * message cannot forge a line.
 *
 * LOG_LIMITED() allows LOG_LIMIT_PER_SEC lines per second per call site;
 * the lines over that are counted, and the next line of that call site in
 * a later second is preceded by "... suppressed N similar messages". */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

#define LOG_LIMIT_PER_SEC 10

struct log_limit {
    _Atomic int64_t sec;   /* the second being counted */
    _Atomic uint32_t n;    /* lines of that second so far */
    _Atomic uint32_t held; /* lines suppressed, not yet reported */
};

/* Where and what: fd (not closed by the logger) and the highest level
 * written. Set before other threads log. */
void log_setup(int fd, enum log_level level);
int log_fd(void);
/* "error", "warn", "info", "debug" -> 0, or -1 when unknown. */
int log_level_parse(const char *s, enum log_level *out);

extern enum log_level log_max_level;
static inline bool log_enabled(enum log_level level)
{
    return level <= log_max_level;
}

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same through a rate limit (see above). */
void log_limited(struct log_limit *l, enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define LOG_LIMITED(level, ...)                                                                    \
    do {                                                                                           \
        static struct log_limit log_limit_;                                                        \
        if (log_enabled(level))                                                                    \
            log_limited(&log_limit_, level, __VA_ARGS__);                                          \
    } while (0)

/* The limiter itself, with the clock given (for tests): whether a line at
 * second now may go out (at most max per second); *report is set to the
 * count suppressed before it that is now to be reported (else 0). */
bool log_limit_allow(struct log_limit *l, int64_t now, uint32_t max, uint32_t *report);
