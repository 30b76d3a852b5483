/* Status lines and error pages, prebuilt at compile time from the generated
 * table for every code from 100 to 599: sending one is a memcpy. */
#include "http/status.h"

#include <errno.h>

#include "status_table.h"

struct status_entry {
    struct view line, reason, page;
};

#define PAGE(code, text)                                                                           \
    "<!doctype html>\n<html><head><title>" #code " " text "</title></head>\n"                      \
    "<body><h1>" #code " " text "</h1></body></html>\n"
#define ENTRY(code, text)                                                                          \
    [code - 100] = {.line = VIEW_LIT("HTTP/1.1 " #code " " text "\r\n"),                           \
                    .reason = VIEW_LIT(text),                                                      \
                    .page = VIEW_LIT(PAGE(code, text))},

static const struct status_entry table[500] = {STATUS_TABLE(ENTRY)};

static const struct status_entry *lookup(int status)
{
    /* a code colibri has no name for goes out as itself, with an empty
     * reason phrase; one that is not a status code at all is a 500 */
    if (status < 100 || status > 599)
        status = 500;
    return &table[status - 100];
}

struct view http_status_line(int status)
{
    return lookup(status)->line;
}
struct view http_status_reason(int status)
{
    return lookup(status)->reason;
}
struct view http_error_page(int status)
{
    return lookup(status)->page;
}

int http_status_of(int err)
{
    switch (err) {
    case -EBADMSG:
        return 400;
    case -ETIMEDOUT:
        return 408;
    case -EFBIG:
        return 413;
    case -ENAMETOOLONG:
        return 414;
    case -EMEDIUMTYPE:
        return 415;
    case -EOPNOTSUPP:
        return 417;
    case -EMSGSIZE:
        return 431;
    case -ENOSYS:
        return 501;
    case -EPROTONOSUPPORT:
        return 505;
    default:
        return 500;
    }
}
