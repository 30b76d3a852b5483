/* status.h - status lines, reason phrases and built-in error pages, from
 * the table generated out of status.txt. Pure lookups, any thread. */
#pragma once

#include "base/common.h"

/* "HTTP/1.1 200 OK\r\n"; a code without a name gets "HTTP/1.1 499 \r\n", and
 * one outside 100-599 the line of 500. */
struct view http_status_line(int status);
/* "OK" */
struct view http_status_reason(int status);
/* A small HTML page for an error status. */
struct view http_error_page(int status);
