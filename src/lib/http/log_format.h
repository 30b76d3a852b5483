/* log_format.h - log_format: access log lines made of named fields.
 *
 *   log_format = combined                    the default: access_log.c's own writer
 *   log_format = json                        an object of every field below
 *   log_format = json host status request_time_ms    an object of those, in that order
 *   log_format = "$remote_addr $host \"$request\" $status $request_time_ms"
 *
 * A text format is its bytes as written, with $NAME (a field's name) for
 * the field's value and $$ for a '$'. In a text line a string field has
 * every byte below 0x20, from 0x7f, '"' and '\' written as \xHH (as in
 * Combined), and an absent field is "-"; in a JSON line strings are JSON
 * strings where '"' and '\' are escaped and every byte below 0x20 and from
 * 0x7f is \u00HH (so a line is ASCII and always parses: a byte above 0x7f
 * reads as the character of that number), numbers are numbers and an
 * absent field is null. One line per request, ending with '\n'.
 *
 * The fields are one table (log_format.c): a new one (the TLS protocol,
 * a gateway's upstream address, status and time) is a row there and a
 * case in the value function, nothing else. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "base/common.h"

struct colibri_request;
struct colibri_response;
struct strbuf;
struct http_log_format;

/* spec compiled into *out (NULL for "combined"): 0, or -EINVAL with why. */
int http_log_format_compile(const char *spec, struct http_log_format **out, char *why,
                            size_t whylen);
void http_log_format_free(struct http_log_format *f);
/* The line of req in format f, appended to b: 0, or -ENOMEM (b as it was). */
int http_log_format_line(const struct http_log_format *f, struct colibri_request *req,
                         struct colibri_response *resp, struct strbuf *b);
/* The field names, space-separated (for messages and the README test). */
const char *http_log_field_names(void);

/* --- shared with access_log.c (its Combined writer's pieces) --- */
struct http_worker;
struct conn_peer;
/* v with \xHH escapes (see above) at p, which has room for 4 * v.len bytes. */
char *http_log_escape(char *p, struct view v);
/* Referer and User-Agent of a validated head's field lines (found or not). */
void http_log_find_fields(struct view h, struct view *ref, bool *has_ref, struct view *ua,
                          bool *has_ua);
/* The worker's "22/Nov/2026:13:40:00 +0000" for now (its length in hw->log_date_len). */
const char *http_log_date(struct http_worker *hw, time_t now);
/* The client's address as text at p (room for INET6_ADDRSTRLEN), cached per worker. */
char *http_log_addr(char *p, struct http_worker *hw, const struct conn_peer *peer);
