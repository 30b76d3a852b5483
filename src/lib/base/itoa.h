/* itoa.h - integer to decimal text with a digit-pair table (no snprintf).
 *
 * The writers do not NUL-terminate; they return the number of bytes written,
 * which is at most U64_STR_MAX (plus one for the sign of i64_to_str).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define U64_STR_MAX 20

size_t u64_to_str(uint64_t v, char *out);
size_t i64_to_str(int64_t v, char *out);
/* Number of decimal digits of v (1 for 0). */
unsigned u64_digits(uint64_t v);
