/* date.h - HTTP dates (RFC 9110 §5.6.7): formatting and parsing.
 *
 * Times are seconds since the Unix epoch, in UTC. Pure functions: no
 * locale, no time zone, no strftime/strptime, any thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "Sun, 06 Nov 1994 08:49:37 GMT" */
#define HTTP_DATE_LEN 29

/* Writes the IMF-fixdate of t into out (exactly HTTP_DATE_LEN bytes, no
 * NUL). Times before 1970 or after 9999 are clamped to those years' ends. */
void http_date_format(int64_t t, char *out);

/* Parses the three forms a recipient must accept: IMF-fixdate, the
 * obsolete RFC 850 form ("Sunday, 06-Nov-94 08:49:37 GMT"; years 70-99 are
 * 19xx, 00-69 are 20xx) and asctime ("Sun Nov  6 08:49:37 1994"). Leading
 * and trailing blanks are allowed; anything else is false. */
bool http_date_parse(const char *p, size_t len, int64_t *t);
