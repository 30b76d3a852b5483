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

/* The one place where an error becomes a status. Inside the HTTP layer a
 * failure is -errno (the parser, the chunked decoder, the body readers,
 * the multipart reader); it becomes the status that answers it here, where
 * the request is answered or a public colibri_* call returns a status:
 *   -EBADMSG 400 malformed          -ETIMEDOUT 408 too slow
 *   -EFBIG 413 body too large       -ENAMETOOLONG 414 target too long
 *   -EMEDIUMTYPE 415 media type     -EOPNOTSUPP 417 expectation
 *   -EMSGSIZE 431 head too large    -ENOSYS 501 not implemented
 *   -EPROTONOSUPPORT 505 version    anything else (-ENOMEM, -EIO, -ENOSPC) 500 */
int http_status_of(int err);
