/* Status lines and error pages, prebuilt at compile time from the generated
 * table: sending one is a memcpy. */
#include "http/status.h"
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
    if (status >= 100 && status <= 599 && table[status - 100].line.p)
        return &table[status - 100];
    /* an unknown code is answered as the generic code of its class */
    static const int generic[] = {500, 200, 200, 302, 400, 500};
    int g = status >= 100 && status <= 599 ? generic[status / 100] : 500;
    return &table[g - 100];
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
